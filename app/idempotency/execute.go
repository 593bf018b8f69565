package idempotency

import (
	"bytes"
	"context"
	"errors"
	"net/http"

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
// what the work described, else the reference its error carries.
func pendingOutcome(o Outcome, herr error) Outcome {
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

// unkeyed runs a request that came without a key the way a keyed one runs,
// under a key the server makes ("auto:" and the request id): the intent is
// on the record before the vendor hears of it, so that no intent the server
// accepted is ever dropped, even when the process dies mid-call.
func (g *Guard) unkeyed(c echo.Context, next echo.HandlerFunc, rec *Record) error {
	ctx, cancel := settleContext(c.Request().Context())
	defer cancel()
	if err := g.keepAuto(ctx, rec, g.requestID(c)); err != nil {
		g.cfg.Log.Error("record intent failed", "operation", rec.Operation, "request_id", g.requestID(c), "error", err)
		return notRecorded(err)
	}
	return g.execute(g.httpAttempt(c, next, rec, lookup{}), "executed")
}

// httpAttempt is a request as the state machine runs it: the handler is the
// work, its response (captured as it is written, the error response too) is
// what a 2xx stores, and outcomes are noted for the access log.
func (g *Guard) httpAttempt(c echo.Context, next echo.HandlerFunc, rec *Record, prior lookup) *attempt {
	return &attempt{
		rec:       rec,
		prior:     prior,
		parent:    c.Request().Context(),
		requestID: g.requestID(c),
		note:      func(r *Record, outcome string) { g.logOutcome(c, r, outcome) },
		work: func(ctx context.Context) (Response, Outcome, error) {
			c.SetRequest(c.Request().WithContext(ctx))
			capture := &captureWriter{ResponseWriter: c.Response().Writer}
			c.Response().Writer = capture
			if herr := next(c); herr != nil {
				if isOutcomeUnknown(herr) {
					return Response{}, described(c), herr
				}
				c.Error(herr) // write the error response here, so it is captured
			}
			return responseOf(c, capture), described(c), nil
		},
	}
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
