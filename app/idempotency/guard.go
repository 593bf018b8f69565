package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/oklog/ulid/v2"
)

// The request and response headers of the idempotency contract.
const (
	HeaderKey      = "Idempotency-Key"
	headerReplayed = "Idempotent-Replayed"
)

// Errors the guard answers with; app/http maps each to its status and code.
var (
	ErrKeyInvalid = errors.New("idempotency key invalid")   // 400 idempotency_key_invalid
	ErrKeyMissing = errors.New("idempotency key missing")   // 400 idempotency_key_missing
	ErrKeyReused  = errors.New("idempotency key reused")    // 422 idempotency_key_reused
	ErrInProgress = errors.New("request in progress")       // 409 request_in_progress
	ErrPending    = errors.New("operation outcome pending") // 202 operation_pending
	// ErrNotKept: an intent's outcome is unknown and the database could not
	// record it either; the retry converges on the natural key. 503.
	ErrNotKept        = errors.New("pending intent could not be recorded")
	ErrNotRecorded    = errors.New("intent could not be recorded; nothing was done") // 503
	ErrBodyUnreadable = errors.New("request body unreadable")                        // 400; the route reads the body for Serve
	ErrDiscarded      = errors.New("intent discarded by an operator")                // 409, until its key expires
)

// Config is what the layer needs from the application.
type Config struct {
	Store       *Store
	TTL         time.Duration                   // how long a record lives
	LockTimeout time.Duration                   // the lease of an executing request
	Required    bool                            // refuse writes without a key
	Operations  *Operations                     // the only operations the guard serves; required
	Log         *slog.Logger                    // nil: discard
	Now         func() time.Time                // nil: time.Now
	Observe     func(operation, outcome string) // when set, counts each request's outcome
	// ReplayCache is how many completed records this replica keeps in
	// memory for replays (see replayCache); 0: none, every replay reads
	// its record with its token row.
	ReplayCache int
}

// Guard is the idempotency layer: an Operation's Serve and Do run through it.
type Guard struct {
	cfg   Config
	cache *replayCache // nil: none
}

// New returns a Guard.
func New(cfg Config) (*Guard, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("idempotency: New needs a Store")
	case cfg.Operations == nil:
		return nil, errors.New("idempotency: New needs the application's Operations")
	}
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
	if cfg.Observe == nil {
		cfg.Observe = func(string, string) {}
	}
	return &Guard{cfg: cfg, cache: newReplayCache(cfg.ReplayCache)}, nil
}

// HeaderKey is the key an Idempotency-Key header's values give: one value
// of 1–255 visible ASCII characters (MySQL raises an error comparing the
// ASCII column with anything else), not one the server would make; "" when
// none was given and none is required.
func (g *Guard) HeaderKey(values []string) (string, error) {
	if len(values) == 0 {
		if g.cfg.Required {
			return "", ErrKeyMissing
		}
		return "", nil
	}
	if len(values) > 1 || !validKey(values[0]) || strings.HasPrefix(values[0], autoPrefix) {
		return "", ErrKeyInvalid
	}
	return values[0], nil
}

// validKey is the one rule for every key: 1–255 visible ASCII characters.
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

// makeRecord is the record a new execution reserves, under a lease from now.
func (g *Guard) makeRecord(sc scope, requestHash string, body []byte, requestedBy, correlationID string) *Record {
	now := g.now()
	lease := now.Add(g.cfg.LockTimeout)
	id := ulid.Make().String()
	return &Record{
		PublicID:      &id,
		RequestedBy:   ptr.OrNil(requestedBy),
		ConsumerID:    sc.ConsumerID,
		Operation:     sc.Operation,
		Key:           sc.Key,
		RequestHash:   requestHash,
		RequestBody:   body,
		Status:        statusProcessing,
		Phase:         ptr.OrNil(phaseReserved),
		CorrelationID: ptr.OrNil(correlationID),
		LockedUntil:   &lease,
		Attempts:      1,
		CreatedAt:     now,
		UpdatedAt:     now,
		ExpiresAt:     now.Add(g.cfg.TTL),
	}
}

// now is the clock, in UTC to the microsecond, as both databases store it.
func (g *Guard) now() time.Time { return dbtime.Stamp(g.cfg.Now()) }

// notRecorded is the answer when the store failed before the work began:
// ErrNotRecorded (503) when the database is unavailable, else the error as
// it is (a bug is a 500, not "retry").
func notRecorded(err error) error {
	if errors.Is(err, database.ErrUnavailable) {
		return fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return err
}

// lookup is a keyed request's record, read once before the body is parsed.
type lookup struct {
	done   bool    // the read was made
	rec    *Record // nil: no record
	err    error
	cached bool // rec is the replay cache's: read it, never change it
}

func (g *Guard) lookup(ctx context.Context, sc scope) lookup {
	rec, err := g.cfg.Store.find(ctx, sc)
	return lookup{done: true, rec: rec, err: err}
}

// replayable reports whether the record is a completed, live execution of
// these very bytes (hash): the same intent, replayed with the body unparsed.
func (l lookup) replayable(hash string, now func() time.Time) bool {
	r := l.rec
	return l.err == nil && r != nil && r.Status == StatusCompleted &&
		r.BodyHash != nil && *r.BodyHash == hash && !r.expired(now())
}

// note counts a decision on r and returns it as the request's log
// attributes: a digest of the key, never the key itself.
func (g *Guard) note(r *Record, outcome string) []slog.Attr {
	g.cfg.Observe(r.Operation, outcome)
	attrs := []slog.Attr{
		slog.String("consumer_id", r.ConsumerID),
		slog.String("operation", r.Operation),
		slog.Any("key_digest", keyDigest{store: g.cfg.Store, key: r.Key}),
		slog.String("outcome", outcome),
	}
	if ref := ptr.Deref(r.ExternalRef); ref != "" {
		attrs = append(attrs, slog.String("vendor_ref", ref))
	}
	return attrs
}

// keyDigest is a key's digest (an HMAC), computed only when the line that
// carries it is written: at a level that drops access lines it costs nothing.
type keyDigest struct {
	store *Store
	key   string
}

// LogValue implements slog.LogValuer.
func (d keyDigest) LogValue() slog.Value { return slog.StringValue(d.store.KeyDigest(d.key)) }

var _ slog.LogValuer = keyDigest{}
