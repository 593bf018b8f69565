package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"
)

const ctxOutcome = "idempotency.outcome"

// Describe tells the layer what the handler's execution produced (the
// resource it created, the vendor's reference), to keep with the record.
func Describe(c echo.Context, o Outcome) { c.Set(ctxOutcome, o) }

func described(c echo.Context) Outcome {
	o, _ := c.Get(ctxOutcome).(Outcome)
	return o
}

// outcomeUnknown is how a handler's error says "the effect may have
// happened": the domain's uncertain errors implement it.
type outcomeUnknown interface {
	OutcomeUnknown() bool
}

// isOutcomeUnknown reports whether err says the effect may have happened.
func isOutcomeUnknown(err error) bool {
	var u outcomeUnknown
	return errors.As(err, &u) && u.OutcomeUnknown()
}

// externalRefer is how an uncertain error names what the pending intent is
// known by at the other side (for licenses, the domain).
type externalRefer interface {
	ExternalRef() string
}

// pendingOutcome is what to keep with an intent whose outcome is unknown:
// what the handler described, else the reference its error carries.
func pendingOutcome(c echo.Context, herr error) Outcome {
	o := described(c)
	var r externalRefer
	if o.ExternalRef == "" && errors.As(herr, &r) {
		o.ExternalRef = r.ExternalRef()
	}
	return o
}

// PendingError is the answer to a request whose intent's outcome is not
// known yet (202 operation_pending): it names the intent, so the client can
// ask for its outcome.
type PendingError struct {
	ID  string // the intent's public id
	Err error  // why the outcome is unknown; nil when a retry found it pending
}

func (e *PendingError) Error() string {
	if e.Err == nil {
		return "operation " + e.ID + " pending"
	}
	return "operation " + e.ID + " pending: " + e.Err.Error()
}

// Is matches ErrPending.
func (e *PendingError) Is(target error) bool { return target == ErrPending }

// Unwrap exposes the cause.
func (e *PendingError) Unwrap() error { return e.Err }

// execute runs the handler as the owner of rec, then settles the record. The
// handler runs detached from the client's connection, within the work budget
// of the lease (which began before the reservation).
func (g *Guard) execute(c echo.Context, next echo.HandlerFunc, rec *Record, outcome string) error {
	ctx, cancel := detach(c.Request().Context(), workDeadline(*rec.LockedUntil, g.now(), g.cfg.LockTimeout))
	defer cancel()
	c.SetRequest(c.Request().WithContext(ctx))
	capture := &captureWriter{ResponseWriter: c.Response().Writer}
	c.Response().Writer = capture

	settled := false
	defer func() {
		if !settled { // a panic: release the key, and let the panic become a 500
			g.release(c, rec)
		}
	}()
	herr := next(c)
	settled = true
	if isOutcomeUnknown(herr) {
		return g.keepPending(c, rec, herr)
	}
	if herr != nil {
		c.Error(herr) // write the error response here, so it is captured
	}
	g.settle(c, rec, capture, outcome)
	return nil
}

// keepPending records an intent whose outcome is unknown as pending before
// the client hears of it: a 202 promises that the intent is kept. When it
// cannot be recorded the answer is ErrNotKept (503, retry), and the record
// stays processing, for a retry to take over once its lease ends, or the
// reconciler when none comes.
func (g *Guard) keepPending(c echo.Context, rec *Record, herr error) error {
	ctx, cancel := g.settleContext(c)
	defer cancel()
	o := pendingOutcome(c, herr)
	rec.ExternalRef = nullable(o.ExternalRef)
	if err := g.cfg.Store.MarkPending(ctx, rec, o, g.now()); err != nil {
		g.logOutcome(c, rec, "not_kept")
		g.cfg.Log.Error("keep pending intent failed", "operation", rec.Operation,
			"key_digest", g.cfg.Store.KeyDigest(rec.Key), "request_id", g.requestID(c), "error", err)
		return fmt.Errorf("%w: %w", ErrNotKept, herr)
	}
	g.logOutcome(c, rec, "pending")
	return &PendingError{ID: rec.Ref(), Err: herr}
}

// unkeyed runs a request that came without a key the way a keyed one runs,
// under a key the server makes ("auto:" and the request id): the intent is
// on the record before the vendor hears of it, so that no intent the server
// accepted is ever dropped, even when the process dies mid-call.
func (g *Guard) unkeyed(c echo.Context, next echo.HandlerFunc, rec *Record) error {
	ctx, cancel := g.settleContext(c)
	defer cancel()
	if err := g.keepAuto(ctx, rec, g.requestID(c)); err != nil {
		g.cfg.Log.Error("record intent failed", "operation", rec.Operation, "request_id", g.requestID(c), "error", err)
		return notRecorded(err)
	}
	return g.execute(c, next, rec, "executed")
}

// keepAuto reserves rec under "auto:<request id>", or under a fresh id when
// a client sent the same request id twice.
func (g *Guard) keepAuto(ctx context.Context, rec *Record, requestID string) error {
	var err error
	for _, key := range []string{"auto:" + requestID, "auto:" + ulid.Make().String()} {
		rec.ID, rec.Key = 0, key
		var ok bool
		if _, ok, err = g.cfg.Store.Reserve(ctx, rec); ok {
			return nil
		}
		if err != nil && !errors.Is(err, errRaced) {
			return err
		}
	}
	if err == nil {
		err = errRaced
	}
	return err
}

// settle stores what had an effect and releases the rest, so that a retry
// runs for real.
func (g *Guard) settle(c echo.Context, rec *Record, w *captureWriter, outcome string) {
	ctx, cancel := g.settleContext(c)
	defer cancel()
	o := described(c)
	rec.ExternalRef = nullable(o.ExternalRef)
	var err error
	if w.status >= 200 && w.status < 300 {
		err = g.cfg.Store.Complete(ctx, rec, responseOf(c, w), o, g.now())
	} else {
		outcome = "released"
		err = g.cfg.Store.Release(ctx, rec)
	}
	g.logOutcome(c, rec, outcome)
	if err != nil {
		// The record stays processing; when its lease runs out a retry takes
		// it over and converges on the same vendor site.
		g.cfg.Log.Error("idempotency settle failed", "operation", rec.Operation,
			"key_digest", g.cfg.Store.KeyDigest(rec.Key), "request_id", g.requestID(c), "error", err)
	}
}

func (g *Guard) release(c echo.Context, rec *Record) {
	ctx, cancel := g.settleContext(c)
	defer cancel()
	g.logOutcome(c, rec, "released")
	if err := g.cfg.Store.Release(ctx, rec); err != nil {
		g.cfg.Log.Error("idempotency release failed", "key_digest", g.cfg.Store.KeyDigest(rec.Key), "error", err)
	}
}

// settleContext outlives the client: the record must be settled even when
// the client has hung up.
func (g *Guard) settleContext(c echo.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(c.Request().Context()), 10*time.Second)
}

// responseOf is the response to store: status, body bytes, and the headers
// a replay must repeat.
func responseOf(c echo.Context, w *captureWriter) Response {
	h := map[string]string{}
	for _, name := range []string{echo.HeaderContentType, echo.HeaderLocation} {
		if v := c.Response().Header().Get(name); v != "" {
			h[name] = v
		}
	}
	return Response{Status: w.status, Headers: h, Body: w.body.Bytes()}
}

// replay answers with a stored response: the same status, the same body
// byte for byte, the same Content-Type and Location.
func replay(c echo.Context, r *Record) error {
	status := http.StatusOK
	if r.ResponseStatus != nil {
		status = *r.ResponseStatus
	}
	h := c.Response().Header()
	if r.ResponseHeaders != nil {
		if err := eachHeader(*r.ResponseHeaders, h.Set); err != nil {
			return err
		}
	}
	h.Set(HeaderReplayed, "true")
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(r.ResponseBody)
	return err
}

// captureWriter copies the response as it is written; the copy is complete
// even when the client has gone and writes to it fail.
type captureWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *captureWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
