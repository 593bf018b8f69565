package idempotency

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"
)

// HeaderKey and HeaderReplayed are the request and response headers of the
// idempotency contract.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// Errors the middleware answers with; app/http maps each to its status and code.
var (
	ErrKeyInvalid = errors.New("idempotency key invalid")   // 400 idempotency_key_invalid
	ErrKeyMissing = errors.New("idempotency key missing")   // 400 idempotency_key_missing
	ErrKeyReused  = errors.New("idempotency key reused")    // 422 idempotency_key_reused
	ErrInProgress = errors.New("request in progress")       // 409 request_in_progress
	ErrPending    = errors.New("operation outcome pending") // 202 operation_pending
	// ErrNotKept means an intent's outcome is unknown and it could not be
	// recorded either (the database failed): the client must retry, and the
	// retry converges on the natural key. 503.
	ErrNotKept = errors.New("pending intent could not be recorded")
	// ErrNotRecorded means the intent could not be put on the record before
	// its work began (the database failed), so nothing was done: the client
	// retries. 503.
	ErrNotRecorded = errors.New("intent could not be recorded; nothing was done")
	// ErrBodyUnreadable wraps a failure to read the request body. 400.
	ErrBodyUnreadable = errors.New("request body unreadable")
)

// Config is what the layer needs from the application.
type Config struct {
	Store       *Store
	TTL         time.Duration // how long a record lives
	LockTimeout time.Duration // the lease of an executing request
	Required    bool          // refuse writes without a key
	// Consumer names the caller of a request; it scopes every key.
	Consumer func(echo.Context) string
	// RequestID is the request's id, kept as the record's correlation id.
	RequestID func(echo.Context) string
	// Requester names who asked (the token's id), kept with the record.
	Requester func(echo.Context) string
	Log       *slog.Logger     // nil: discard
	Now       func() time.Time // nil: time.Now
	// Observe, when set, counts each request's outcome (for metrics).
	Observe func(operation, outcome string)
}

// Guard is the idempotency layer; Middleware mounts it on a route.
type Guard struct {
	cfg Config
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = time.Minute
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.RequestID == nil {
		cfg.RequestID = func(echo.Context) string { return "" }
	}
	if cfg.Requester == nil {
		cfg.Requester = func(echo.Context) string { return "" }
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string, string) {}
	}
	return &Guard{cfg: cfg}
}

// Options tune one operation.
type Options struct {
	// Key, when set, is the intent's key, taken from the request itself for
	// an operation whose intent the URL names (a revoke: the license's id);
	// the Idempotency-Key header is then not read.
	Key func(c echo.Context) string
	// Bind parses and validates the request body, once, for both the
	// fingerprint and the handler (which it hands the parsed request through
	// c). It returns the canonical form of just the fields that make the
	// intent, so that volatile metadata a client adds does not turn a retry
	// into a conflict. An error is the answer as it is, given before any
	// record is made. Nil: the intent is the whole canonical body.
	Bind func(c echo.Context, body []byte) (intent []byte, err error)
}

// Middleware guards a write route as operation (e.g. "licenses.store"): the
// work happens once per key, and every retry gets the first response back.
func (g *Guard) Middleware(operation string, opts Options) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key, err := g.key(c, opts)
			if err != nil {
				return err
			}
			body, err := readBody(c)
			if err != nil {
				return err
			}
			hash := bodyHash(c.Request().Method, c.Path(), body)
			var prior lookup
			if key != "" {
				if prior = g.lookup(c, operation, key); prior.replayable(hash, g.now) {
					// The fast path of a retry: the same bytes as the first
					// execution, so the same intent; nothing to parse.
					g.logOutcome(c, prior.rec, "replayed")
					return replay(c, prior.rec)
				}
			}
			rec, err := g.newRecord(c, operation, key, body, opts)
			if err != nil {
				return err
			}
			rec.BodyHash = &hash
			if key == "" { // the server makes the key: the intent is on the record all the same
				return g.unkeyed(c, next, rec)
			}
			return g.guard(c, next, rec, prior)
		}
	}
}

// key returns the request's Idempotency-Key: 1–255 visible ASCII characters,
// given once. "" means none was given (and none is required).
func (g *Guard) key(c echo.Context, opts Options) (string, error) {
	if opts.Key != nil {
		return opts.Key(c), nil
	}
	vals := c.Request().Header.Values(HeaderKey)
	if len(vals) == 0 {
		if g.cfg.Required {
			return "", ErrKeyMissing
		}
		return "", nil
	}
	if len(vals) > 1 || !validKey(vals[0]) {
		return "", ErrKeyInvalid
	}
	return vals[0], nil
}

// validKey reports whether key is a key the layer accepts: 1–255 visible
// ASCII characters (the column is ASCII). The one rule for the header and Do.
func validKey(key string) bool {
	if len(key) == 0 || len(key) > 255 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if b := key[i]; b < 0x21 || b > 0x7E {
			return false
		}
	}
	return true
}

// readBody reads the body for the fingerprint and puts it back for the handler.
func readBody(c echo.Context) ([]byte, error) {
	req := c.Request()
	if req.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBodyUnreadable, err)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

func (g *Guard) newRecord(c echo.Context, operation, key string, body []byte, opts Options) (*Record, error) {
	canonical := Canonical(body)
	intent := canonical
	if opts.Bind != nil {
		var err error
		if intent, err = opts.Bind(c, body); err != nil {
			return nil, err
		}
	}
	sc := Scope{ConsumerID: g.cfg.Consumer(c), Operation: operation, Key: key}
	return g.makeRecord(sc, Fingerprint(c.Request().Method, c.Path(), intent), canonical,
		g.cfg.Requester(c), g.requestID(c)), nil
}

// makeRecord is the record a new execution of an intent reserves: processing,
// under a lease that starts now.
func (g *Guard) makeRecord(sc Scope, requestHash string, body []byte, requestedBy, correlationID string) *Record {
	now := g.now()
	lease := now.Add(g.cfg.LockTimeout)
	id := ulid.Make().String()
	return &Record{
		PublicID:      &id,
		RequestedBy:   nullable(requestedBy),
		ConsumerID:    sc.ConsumerID,
		Operation:     sc.Operation,
		Key:           sc.Key,
		RequestHash:   requestHash,
		RequestBody:   body,
		Status:        StatusProcessing,
		CorrelationID: nullable(correlationID),
		LockedUntil:   &lease,
		Attempts:      1,
		CreatedAt:     now,
		UpdatedAt:     now,
		ExpiresAt:     now.Add(g.cfg.TTL),
	}
}

// now is the clock, in UTC to the microsecond, as both databases store it.
func (g *Guard) now() time.Time { return g.cfg.Now().UTC().Truncate(time.Microsecond) }

func (g *Guard) requestID(c echo.Context) string { return g.cfg.RequestID(c) }

// guard runs a keyed request through the state machine (run), and answers
// a replay with the stored response.
func (g *Guard) guard(c echo.Context, next echo.HandlerFunc, rec *Record, prior lookup) error {
	stored, err := g.run(g.httpAttempt(c, next, rec, prior))
	if stored != nil {
		return replay(c, stored)
	}
	return err
}

// notRecorded is the answer when the store failed before the work began:
// ErrNotRecorded (503, retry) when the database is unavailable for now; any
// other failure is returned as it is (a bug is a 500, not "retry").
func notRecorded(err error) error {
	var u interface{ Unavailable() bool }
	if errors.As(err, &u) && u.Unavailable() {
		return fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return err
}

// lookup is what the record of a keyed request's scope was, read once before
// the body is parsed.
type lookup struct {
	done bool    // the read was made
	rec  *Record // nil: no record
	err  error
}

// lookup reads the record of the request's scope.
func (g *Guard) lookup(c echo.Context, operation, key string) lookup {
	rec, err := g.cfg.Store.Find(c.Request().Context(), Scope{ConsumerID: g.cfg.Consumer(c), Operation: operation, Key: key})
	return lookup{done: true, rec: rec, err: err}
}

// replayable reports whether the record is a completed, live execution of a
// request with exactly these bytes (bodyHash), which a replay may answer
// without the body parsed: the same bytes are the same intent.
func (l lookup) replayable(hash string, now func() time.Time) bool {
	r := l.rec
	return l.err == nil && r != nil && r.Status == StatusCompleted &&
		r.BodyHash != nil && *r.BodyHash == hash && !r.expired(now())
}

// ctxLogAttrs is where a request's idempotency outcome waits for its line.
const ctxLogAttrs = "idempotency.log"

// logOutcome notes the request's idempotency outcome for its access-log line
// (LogAttrs): a digest of the key, never the key itself. The last outcome
// of a request is the one logged.
func (g *Guard) logOutcome(c echo.Context, r *Record, outcome string) {
	attrs := []slog.Attr{
		slog.String("consumer_id", r.ConsumerID),
		slog.String("operation", r.Operation),
		slog.Any("key_digest", keyDigest{store: g.cfg.Store, key: r.Key}),
		slog.String("outcome", outcome),
	}
	if r.ExternalRef != nil {
		attrs = append(attrs, slog.String("vendor_ref", *r.ExternalRef))
	}
	c.Set(ctxLogAttrs, attrs)
	g.cfg.Observe(r.Operation, outcome)
}

// keyDigest is a key's digest (an HMAC), computed only when a handler
// writes the line that carries it: at a log level that drops access lines,
// a request pays nothing for it.
type keyDigest struct {
	store *Store
	key   string
}

// LogValue implements slog.LogValuer.
func (d keyDigest) LogValue() slog.Value { return slog.StringValue(d.store.KeyDigest(d.key)) }

// LogAttrs returns the request's idempotency outcome (consumer_id,
// operation, key_digest, outcome, vendor_ref) for the one line the access
// log writes per request; nil for a request the layer did not decide.
func LogAttrs(c echo.Context) []slog.Attr {
	a, _ := c.Get(ctxLogAttrs).([]slog.Attr)
	return a
}
