package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/oklog/ulid/v2"
)

// attempt is one call for an intent, Serve's or Do's.
type attempt struct {
	rec    *Record
	prior  lookup          // the fast path's read of the scope, when one was made
	parent context.Context // the work keeps its values, not its cancellation
	caller Caller
	work   func(ctx context.Context, x *Execution) (Response, error) // as Operation.Run
	noted  []slog.Attr                                               // the last decision, for the log line
}

func (g *Guard) tell(a *attempt, r *Record, outcome string) { a.noted = g.note(r, outcome) }

// run is the state machine Serve and Do share: replay, refuse, or execute.
// Only the INSERT in reserve (or a compare-and-set on an existing record)
// makes this call the owner.
func (g *Guard) run(a *attempt) (resp Response, replayed bool, err error) {
	rec := a.rec
	// The reservation must not be cut short by a hang-up: an INSERT that
	// committed but reported an error would hold the key for a whole lease.
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	// The fast path for retries: a completed record needs no reservation.
	found, err := a.prior.rec, a.prior.err
	if !a.prior.done || err != nil {
		if found, err = g.cfg.Store.find(ctx, rec.scope()); err != nil {
			return Response{}, false, notRecorded(err)
		}
	}
	if found != nil && found.Status == StatusCompleted && !found.expired(rec.CreatedAt) {
		return g.answerExisting(a, found)
	}
	for range 3 { // a record may change under us; each turn re-reads it
		existing, ok, err := g.cfg.Store.reserve(ctx, rec)
		if errors.Is(err, errRaced) {
			continue
		}
		if err != nil {
			return Response{}, false, notRecorded(err)
		}
		if ok {
			resp, err := g.execute(a, "executed")
			return resp, false, err
		}
		if !takeable(existing, rec) {
			return g.answerExisting(a, existing)
		}
		won, err := g.cfg.Store.takeOver(ctx, existing, rec)
		if err != nil {
			return Response{}, false, notRecorded(err)
		}
		if won {
			resp, err := g.execute(a, "taken_over")
			return resp, false, err
		}
	}
	g.tell(a, rec, "in_progress")
	return Response{}, false, ErrInProgress
}

// takeable reports whether existing may be taken over for rec: expired, or
// rec's own intent failed, abandoned or superseded (settled without an
// answer of its own: the retry runs for real), or its owner's lease ran out.
// A discarded intent is taken over only once expired, as a new intent.
func takeable(existing, rec *Record) bool {
	now := rec.CreatedAt
	if existing.Status == StatusPending {
		return false // an accepted intent is settled by the reconciler, never replaced, expired or not
	}
	if existing.RequestHash != rec.RequestHash {
		// Only a settled intent is forgotten at expiry (what the pruner
		// deletes then: completed, abandoned, superseded, discarded): a
		// failed or unsettled one may have had an effect nobody else knows of.
		return slices.Contains(prunable, existing.Status) && existing.expired(now)
	}
	if existing.Status == statusProcessing && existing.leaseAlive(now) {
		return false // its owner (a request, the reconciler, a discard) is at work, expired or not
	}
	if existing.expired(now) {
		return true
	}
	return existing.Status == StatusFailed || existing.Status == statusAbandoned || existing.Status == statusSuperseded ||
		existing.Status == statusProcessing && !existing.leaseAlive(now)
}

// answerExisting answers from a record this call does not own.
func (g *Guard) answerExisting(a *attempt, existing *Record) (Response, bool, error) {
	if existing.RequestHash != a.rec.RequestHash {
		g.tell(a, a.rec, "mismatch")
		return Response{}, false, ErrKeyReused
	}
	switch existing.Status {
	case StatusCompleted:
		g.tell(a, existing, "replayed")
		resp, err := stored(existing)
		return resp, err == nil, err
	case StatusPending:
		g.tell(a, existing, "pending")
		return Response{}, false, &PendingError{ID: existing.ref()}
	case StatusDiscarded: // closed by an operator: nothing runs until the key expires
		g.tell(a, existing, "discarded")
		return Response{}, false, ErrDiscarded
	}
	g.tell(a, a.rec, "in_progress")
	return Response{}, false, ErrInProgress
}

// execute runs the work as the owner of a.rec, within the work budget of the
// lease (which began before the reservation), then settles the record. A
// panic releases the key and goes on.
func (g *Guard) execute(a *attempt, outcome string) (Response, error) {
	rec := a.rec
	ctx, cancel := detach(a.parent, workDeadline(*rec.LockedUntil, g.now(), g.cfg.LockTimeout))
	defer cancel()
	settled := false
	defer func() {
		if !settled { // a panic
			g.release(a)
		}
	}()
	x := &Execution{Caller: a.caller, store: g.cfg.Store, rec: rec, status: statusProcessing, lease: *rec.LockedUntil, now: g.now}
	resp, err := a.work(ctx, x)
	settled = true
	if isOutcomeUnknown(err) {
		return Response{}, g.keepPending(a, resp, err)
	}
	if isRefusal(err) {
		if p := rec.prior; p != nil && p.Status == statusSuperseded {
			// A retry of a superseded intent that found nothing to answer
			// with: still ours, so superseded again for the next retry.
			g.settle(a, x, Response{ExternalRef: resp.ExternalRef}, refusalOutcome(err))
		} else { // no longer ours (superseded, or taken over): nothing to settle
			g.tell(a, rec, refusalOutcome(err))
		}
		return Response{}, err
	}
	if err != nil {
		resp = Response{ExternalRef: resp.ExternalRef} // a failure had no effect: released
	}
	if serr := g.settle(a, x, resp, outcome); errors.Is(serr, ErrSuperseded) && err != nil {
		// A revoke superseded the intent while it ran, and the work failed
		// for it (the vendor refusing a site the revoke was deleting, say):
		// answered as a retry with its key is, not with the failure's code.
		return Response{}, ErrSuperseded
	}
	return resp, err
}

func refusalOutcome(err error) string {
	if errors.Is(err, ErrSuperseded) {
		return "superseded"
	}
	return "in_progress"
}

// keepPending records an intent whose outcome is unknown as pending before
// the caller hears of it: a 202 promises that it is kept. When that fails
// the answer is ErrNotKept (503) and the record stays processing, for a
// retry to take over once its lease ends, or the reconciler.
func (g *Guard) keepPending(a *attempt, about Response, herr error) error {
	rec := a.rec
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	var r externalRefer
	if about.ExternalRef == "" && errors.As(herr, &r) {
		about.ExternalRef = r.ExternalRef() // what the pending intent is known by at the vendor
	}
	rec.ExternalRef = ptr.OrNil(about.ExternalRef)
	if err := g.cfg.Store.markPending(ctx, rec, about, g.now()); err != nil {
		if g.supersededMeanwhile(ctx, err, rec) {
			g.tell(a, rec, "superseded")
			return ErrSuperseded // what a retry with its key answers: it never runs again
		}
		g.tell(a, rec, "not_kept")
		g.cfg.Log.Error("keep pending intent failed", "operation", rec.Operation,
			"key_digest", g.cfg.Store.KeyDigest(rec.Key), "request_id", a.caller.RequestID, "error", err)
		return fmt.Errorf("%w: %w", ErrNotKept, herr)
	}
	g.tell(a, rec, "pending")
	return &PendingError{ID: rec.ref(), Err: herr}
}

// settle stores what had an effect (a 2xx, unless Finish stored it or it
// says NoEffect) and releases the rest, so that a retry runs for real: a
// failure keeps its fingerprint (giveBack), a NoEffect success nothing.
// ErrSuperseded when a revoke superseded the intent while it ran (an
// expected outcome, not a failure).
func (g *Guard) settle(a *attempt, x *Execution, resp Response, outcome string) error {
	rec := a.rec
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	rec.ExternalRef = ptr.OrNil(resp.ExternalRef)
	var err error
	switch {
	case x.finished:
	case resp.Status >= 200 && resp.Status < 300 && !resp.NoEffect:
		err = g.cfg.Store.complete(ctx, rec, resp, g.now())
	case resp.Status >= 200 && resp.Status < 300 && (rec.prior == nil || rec.prior.Status == statusAbandoned):
		// A success that changed nothing binds nothing: a retry tells the
		// truth of its own time.
		outcome = "released"
		err = g.cfg.Store.release(ctx, rec)
	default:
		outcome = "released"
		err = g.cfg.Store.giveBack(ctx, rec, g.now())
	}
	if g.supersededMeanwhile(ctx, err, rec) {
		g.tell(a, rec, "superseded")
		return ErrSuperseded
	}
	g.tell(a, rec, outcome)
	if err != nil {
		// The record stays processing; when its lease runs out a retry takes
		// it over and converges on the same vendor site.
		g.cfg.Log.Error("idempotency settle failed", "operation", rec.Operation,
			"key_digest", g.cfg.Store.KeyDigest(rec.Key), "request_id", a.caller.RequestID, "error", err)
	}
	return err
}

// supersededMeanwhile reports whether err, an owner's settle that matched
// no row, is because a revoke superseded the record while its work ran.
func (g *Guard) supersededMeanwhile(ctx context.Context, err error, rec *Record) bool {
	if !errors.Is(err, ErrLeaseLost) {
		return false
	}
	// Read on the read pool: the revoke that superseded it has committed,
	// and on SQLite the one writer connection may be busy with others.
	return errors.Is(g.cfg.Store.whyNotOwned(g.cfg.Store.read.WithContext(ctx), rec), ErrSuperseded)
}

// release deletes the record of a.rec after a panic in its work.
func (g *Guard) release(a *attempt) {
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	g.tell(a, a.rec, "released")
	if err := g.cfg.Store.giveBack(ctx, a.rec, g.now()); err != nil {
		g.cfg.Log.Error("idempotency release failed", "key_digest", g.cfg.Store.KeyDigest(a.rec.Key), "error", err)
	}
}

// settleContext outlives the caller: the record is settled even when the
// client has hung up.
func settleContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), 10*time.Second)
}

// outcomeUnknown is how an error says "the effect may have happened": the
// domain's uncertain errors implement it.
type outcomeUnknown interface {
	OutcomeUnknown() bool
}

func isOutcomeUnknown(err error) bool {
	var u outcomeUnknown
	return errors.As(err, &u) && u.OutcomeUnknown()
}

// externalRefer is how an uncertain error names what the pending intent is
// known by at the other side (for licenses, the domain).
type externalRefer interface {
	ExternalRef() string
}

// PendingError answers a request whose intent's outcome is not known yet
// (202 operation_pending), naming the intent so the client can ask after it.
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

// unkeyed runs a request without a key under one the server makes, so that
// the intent is on the record before the vendor hears of it: no accepted
// intent is dropped, even when the process dies mid-call.
func (g *Guard) unkeyed(a *attempt) (Response, error) {
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	if err := g.keepAuto(ctx, a.rec, a.caller.RequestID); err != nil {
		g.cfg.Log.Error("record intent failed", "operation", a.rec.Operation, "request_id", a.caller.RequestID, "error", err)
		return Response{}, notRecorded(err)
	}
	return g.execute(a, "executed")
}

// autoPrefix begins the keys the server makes for requests sent without
// one; a client's Idempotency-Key may not (it would be shown as server-made).
const autoPrefix = "auto:"

// keepAuto reserves rec under "auto:<request id>", or a fresh id when a
// client sent the same request id twice.
func (g *Guard) keepAuto(ctx context.Context, rec *Record, requestID string) error {
	var err error
	for _, key := range []string{autoPrefix + requestID, autoPrefix + ulid.Make().String()} {
		rec.ID, rec.Key = 0, key
		var ok bool
		if _, ok, err = g.cfg.Store.reserve(ctx, rec); ok {
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

// stored is the answer a completed record replays: the same status, body
// byte for byte and headers, plus Idempotent-Replayed.
func stored(r *Record) (Response, error) {
	resp := Response{Status: http.StatusOK, Headers: map[string]string{}, Body: r.ResponseBody,
		ResourceType: ptr.Deref(r.ResourceType), ResourceID: ptr.Deref(r.ResourceID), ExternalRef: ptr.Deref(r.ExternalRef)}
	if r.ResponseStatus != nil {
		resp.Status = *r.ResponseStatus
	}
	if r.ResponseHeaders != nil {
		if err := eachHeader(*r.ResponseHeaders, func(name, value string) { resp.Headers[name] = value }); err != nil {
			return Response{}, err
		}
	}
	resp.Headers[headerReplayed] = "true"
	return resp, nil
}

// WorkBudget is how long the owner of a lease may work: a fifth of the lease
// less, so that the owner settles its record before anyone may take it over.
// Every deadline on owned work derives from it.
func WorkBudget(lease time.Duration) time.Duration { return lease - lease/5 }

// workDeadline is when work under a lease ending at leaseEnd (now and
// leaseEnd on the service's clock) must stop, in real time as context
// deadlines are; time spent since the lease began comes out of the budget.
func workDeadline(leaseEnd, now time.Time, lease time.Duration) time.Time {
	return time.Now().Add(leaseEnd.Sub(now) + WorkBudget(lease) - lease)
}

// detach is the context owned work runs on: parent's values without its
// cancellation, so that a client hanging up cannot cut the work short
// between the vendor's answer and the write that records it.
func detach(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.WithoutCancel(parent), deadline)
}
