package idempotency

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"
)

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
func (g *Guard) unkeyed(a *attempt) error {
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	if err := g.keepAuto(ctx, a.rec, a.requestID); err != nil {
		g.cfg.Log.Error("record intent failed", "operation", a.rec.Operation, "request_id", a.requestID, "error", err)
		return notRecorded(err)
	}
	return g.execute(a, "executed")
}

// autoPrefix begins the keys the server makes for requests sent without
// one; a client's Idempotency-Key may not (it would be shown as server-made).
const autoPrefix = "auto:"

// keepAuto reserves rec under "auto:<request id>", or under a fresh id when
// a client sent the same request id twice.
func (g *Guard) keepAuto(ctx context.Context, rec *Record, requestID string) error {
	var err error
	for _, key := range []string{autoPrefix + requestID, autoPrefix + ulid.Make().String()} {
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
