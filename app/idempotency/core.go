package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"
)

// attempt is one call for an intent as the state machine sees it, whatever
// made it (Serve, Do): the record it would reserve, how to run the
// work, and how to tell of the outcome.
type attempt struct {
	rec   *Record
	prior lookup // the fast path's read of the scope, when one was made
	// parent is the caller's context: the work keeps its values, not its
	// cancellation.
	parent context.Context
	caller Caller // who asks; its RequestID is in the log lines of a failed settle
	// work runs the intent as x (on ctx: detached, within the work
	// budget), as Operation.Run does.
	work func(ctx context.Context, x *Execution) (Response, error)
	// noted is the last decision on the attempt, for its log line.
	noted []slog.Attr
}

// tell notes a decision on the attempt (its log line, metrics); the last
// one told is the attempt's.
func (g *Guard) tell(a *attempt, r *Record, outcome string) { a.noted = g.note(r, outcome) }

// run is the state machine, the one Serve and Do share: from the
// record that holds the scope it decides whether to replay, refuse, or
// execute. Only the INSERT in Reserve (or a compare-and-set on an existing
// record) makes this call the owner. It returns the record to replay when
// the answer is a stored one (replayed); otherwise what the work answered,
// or the call's error.
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
		won, err := g.cfg.Store.TakeOver(ctx, existing, rec)
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

// takeable reports whether the existing record may be taken over for rec:
// it expired, or it is rec's own intent and failed, was abandoned or
// superseded (settled without an answer of its own: the client's retry
// runs for real and tells the truth of its time), or its owner's lease ran
// out. A discarded intent is taken over only once expired, as a new intent.
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
	if existing.Status == StatusProcessing && existing.leaseAlive(now) {
		return false // its owner (a request, the reconciler, a discard) is at work, expired or not
	}
	if existing.expired(now) {
		return true
	}
	return existing.Status == StatusFailed || existing.Status == StatusAbandoned || existing.Status == StatusSuperseded ||
		existing.Status == StatusProcessing && !existing.leaseAlive(now)
}

// answerExisting answers from a record this call does not own: its stored
// answer, or why there is none.
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
		return Response{}, false, &PendingError{ID: existing.Ref()}
	case StatusDiscarded: // closed by an operator: nothing runs until the key expires
		g.tell(a, existing, "discarded")
		return Response{}, false, ErrDiscarded
	}
	g.tell(a, a.rec, "in_progress")
	return Response{}, false, ErrInProgress
}

// execute runs the work as the owner of a.rec, then settles the record. The
// work runs detached from the caller, within the work budget of the lease
// (which began before the reservation). A panic releases the key and goes
// on. It returns the work's answer, or its error: a *PendingError (or
// ErrNotKept) for an unknown outcome, else the error as it is.
func (g *Guard) execute(a *attempt, outcome string) (Response, error) {
	rec := a.rec
	ctx, cancel := detach(a.parent, workDeadline(*rec.LockedUntil, g.now(), g.cfg.LockTimeout))
	defer cancel()
	settled := false
	defer func() {
		if !settled { // a panic: release the key, and let the panic go on
			g.release(a)
		}
	}()
	x := &Execution{Caller: a.caller, store: g.cfg.Store, rec: rec, status: StatusProcessing, lease: *rec.LockedUntil, now: g.now}
	resp, err := a.work(ctx, x)
	settled = true
	if isOutcomeUnknown(err) {
		return Response{}, g.keepPending(a, resp, err)
	}
	if isRefusal(err) {
		if p := rec.prior; p != nil && p.Status == StatusSuperseded {
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

// refusalOutcome is how an owner's refusal is noted.
func refusalOutcome(err error) string {
	if errors.Is(err, ErrSuperseded) {
		return "superseded"
	}
	return "in_progress"
}

// keepPending records an intent whose outcome is unknown as pending before
// the caller hears of it: a 202 promises that the intent is kept. When it
// cannot be recorded the answer is ErrNotKept (503, retry), and the record
// stays processing, for a retry to take over once its lease ends, or the
// reconciler when none comes.
func (g *Guard) keepPending(a *attempt, about Response, herr error) error {
	rec := a.rec
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	var r externalRefer
	if about.ExternalRef == "" && errors.As(herr, &r) {
		about.ExternalRef = r.ExternalRef() // what the pending intent is known by at the vendor
	}
	rec.ExternalRef = nullable(about.ExternalRef)
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
	return &PendingError{ID: rec.Ref(), Err: herr}
}

// settle stores what had an effect (a 2xx, unless Finish stored it or the
// work says it changed nothing) and releases the rest, so that a retry runs
// for real: a failure keeps its fingerprint (GiveBack), a success that
// changed nothing keeps nothing. It returns ErrSuperseded when a revoke
// superseded the intent while it ran (settled for good by then: an expected
// outcome, not a failure), and the store's error when the record could not
// be settled.
func (g *Guard) settle(a *attempt, x *Execution, resp Response, outcome string) error {
	rec := a.rec
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	rec.ExternalRef = nullable(resp.ExternalRef)
	var err error
	switch {
	case x.finished: // completed by Finish, with its local writes
	case resp.Status >= 200 && resp.Status < 300 && !resp.NoEffect:
		err = g.cfg.Store.complete(ctx, rec, resp, g.now())
	case resp.Status >= 200 && resp.Status < 300 && (rec.prior == nil || rec.prior.Status == StatusAbandoned):
		// A success that changed nothing (a domain the consumer already
		// held) binds nothing: the key is free, and a retry tells the truth
		// of its own time. Only a failure keeps its fingerprint.
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

// settleContext outlives the caller: the record must be settled even when
// the client has hung up.
func settleContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), 10*time.Second)
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

// keepAuto reserves rec under "auto:<request id>", or under a fresh id when
// a client sent the same request id twice.
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

// stored is the answer a completed record replays: the same status, the
// same body byte for byte, the same Content-Type and Location, and
// Idempotent-Replayed. A Do caller reads its Outcome's fields too.
func stored(r *Record) (Response, error) {
	resp := Response{Status: http.StatusOK, Headers: map[string]string{}, Body: r.ResponseBody,
		ResourceType: deref(r.ResourceType), ResourceID: deref(r.ResourceID), ExternalRef: deref(r.ExternalRef)}
	if r.ResponseStatus != nil {
		resp.Status = *r.ResponseStatus
	}
	if r.ResponseHeaders != nil {
		if err := eachHeader(*r.ResponseHeaders, func(name, value string) { resp.Headers[name] = value }); err != nil {
			return Response{}, err
		}
	}
	resp.Headers[HeaderReplayed] = "true"
	return resp, nil
}

// WorkBudget is how long the owner of a lease may work: the work ends a fifth
// of the lease before the lease does, so that the owner always settles its
// record before anyone may take it over. This is the one place the rule is
// set; every deadline on owned work (Serve's, the keyless path's, an
// unguarded write's, the reconciler's) derives from it.
func WorkBudget(lease time.Duration) time.Duration { return lease - lease/5 }

// workDeadline is when the work under a lease of length lease, ending at
// leaseEnd on the service's clock (now on that clock), must stop: a real
// time, as context deadlines are, whatever clock the service runs on. Time
// already spent since the lease began comes out of the budget.
func workDeadline(leaseEnd, now time.Time, lease time.Duration) time.Time {
	return time.Now().Add(leaseEnd.Sub(now) + WorkBudget(lease) - lease)
}

// detach returns the context owned work runs on: it keeps parent's values
// but not its cancellation, so that a client hanging up cannot cut the work
// short between the vendor's answer and the write that records it, and it
// ends at deadline. It is the one place a request is detached from its client.
func detach(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.WithoutCancel(parent), deadline)
}
