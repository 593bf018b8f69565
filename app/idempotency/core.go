package idempotency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// attempt is one call for an intent as the state machine sees it, whatever
// made it (the middleware, Do): the record it would reserve, how to run the
// work, and how to tell of the outcome.
type attempt struct {
	rec   *Record
	prior lookup // the fast path's read of the scope, when one was made
	// parent is the caller's context: the work keeps its values, not its
	// cancellation.
	parent    context.Context
	requestID string // for the log lines of a failed settle; "" for none
	// work runs the intent on ctx (detached, within the work budget). A
	// response with a 2xx status had an effect and is stored; any other
	// status, or an error, had none and stores nothing (the key keeps its
	// fingerprint); an error that
	// says the outcome is unknown keeps the intent pending. The Outcome is
	// kept with the record.
	work func(ctx context.Context) (Response, Outcome, error)
	// noted is the last decision on the attempt, for its log line.
	noted Note
}

// tell notes a decision on the attempt (its log line, metrics); the last
// one told is the attempt's.
func (g *Guard) tell(a *attempt, r *Record, outcome string) { a.noted = g.note(r, outcome) }

// run is the state machine, the one the middleware and Do share: from the
// record that holds the scope it decides whether to replay, refuse, or
// execute. Only the INSERT in Reserve (or a compare-and-set on an existing
// record) makes this call the owner. It returns the record to replay when
// the answer is a stored one; otherwise nil and the call's error (nil: the
// work ran and settled, and its answer is what it returned).
func (g *Guard) run(a *attempt) (replay *Record, err error) {
	rec := a.rec
	// The reservation must not be cut short by a hang-up: an INSERT that
	// committed but reported an error would hold the key for a whole lease.
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	// The fast path for retries: a completed record needs no reservation.
	found, err := a.prior.rec, a.prior.err
	if !a.prior.done || err != nil {
		if found, err = g.cfg.Store.Find(ctx, rec.scope()); err != nil {
			return nil, notRecorded(err)
		}
	}
	if found != nil && found.Status == StatusCompleted && !found.expired(rec.CreatedAt) {
		return g.answerExisting(a, found)
	}
	for range 3 { // a record may change under us; each turn re-reads it
		existing, ok, err := g.cfg.Store.Reserve(ctx, rec)
		if errors.Is(err, errRaced) {
			continue
		}
		if err != nil {
			return nil, notRecorded(err)
		}
		if ok {
			return nil, g.execute(a, "executed")
		}
		if !takeable(existing, rec) {
			return g.answerExisting(a, existing)
		}
		won, err := g.cfg.Store.TakeOver(ctx, existing, rec)
		if err != nil {
			return nil, notRecorded(err)
		}
		if won {
			return nil, g.execute(a, "taken_over")
		}
	}
	g.tell(a, rec, "in_progress")
	return nil, ErrInProgress
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

// answerExisting answers from a record this call does not own: the record
// to replay, or why there is none.
func (g *Guard) answerExisting(a *attempt, existing *Record) (*Record, error) {
	if existing.RequestHash != a.rec.RequestHash {
		g.tell(a, a.rec, "mismatch")
		return nil, ErrKeyReused
	}
	switch existing.Status {
	case StatusCompleted:
		g.tell(a, existing, "replayed")
		return existing, nil
	case StatusPending:
		g.tell(a, existing, "pending")
		return nil, &PendingError{ID: existing.Ref()}
	case StatusDiscarded: // closed by an operator: nothing runs until the key expires
		g.tell(a, existing, "discarded")
		return nil, ErrDiscarded
	}
	g.tell(a, a.rec, "in_progress")
	return nil, ErrInProgress
}

// execute runs the work as the owner of a.rec, then settles the record. The
// work runs detached from the caller, within the work budget of the lease
// (which began before the reservation). A panic releases the key and goes
// on. It returns the work's error: a *PendingError (or ErrNotKept) for an
// unknown outcome, else the error as it is.
func (g *Guard) execute(a *attempt, outcome string) error {
	rec := a.rec
	ctx, cancel := detach(a.parent, workDeadline(*rec.LockedUntil, g.now(), g.cfg.LockTimeout))
	defer cancel()
	settled := false
	defer func() {
		if !settled { // a panic: release the key, and let the panic go on
			g.release(a)
		}
	}()
	resp, o, err := a.work(ctx)
	settled = true
	if isOutcomeUnknown(err) {
		return g.keepPending(a, o, err)
	}
	if isRefusal(err) {
		if p := rec.prior; p != nil && p.Status == StatusSuperseded {
			// A retry of a superseded intent that found nothing to answer
			// with: still ours, so superseded again for the next retry.
			g.settle(a, Response{}, o, refusalOutcome(err))
		} else { // no longer ours (superseded, or taken over): nothing to settle
			g.tell(a, rec, refusalOutcome(err))
		}
		return err
	}
	if err != nil {
		resp = Response{} // a failure had no effect: released
	}
	if serr := g.settle(a, resp, o, outcome); errors.Is(serr, ErrSuperseded) && err != nil {
		// A revoke superseded the intent while it ran, and the work failed
		// for it (the vendor refusing a site the revoke was deleting, say):
		// answered as a retry with its key is, not with the failure's code.
		return ErrSuperseded
	}
	return err
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
func (g *Guard) keepPending(a *attempt, o Outcome, herr error) error {
	rec := a.rec
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	o = pendingOutcome(o, herr)
	rec.ExternalRef = nullable(o.ExternalRef)
	if err := g.cfg.Store.MarkPending(ctx, rec, o, g.now()); err != nil {
		if g.supersededMeanwhile(ctx, err, rec) {
			g.tell(a, rec, "superseded")
			return ErrSuperseded // what a retry with its key answers: it never runs again
		}
		g.tell(a, rec, "not_kept")
		g.cfg.Log.Error("keep pending intent failed", "operation", rec.Operation,
			"key_digest", g.cfg.Store.KeyDigest(rec.Key), "request_id", a.requestID, "error", err)
		return fmt.Errorf("%w: %w", ErrNotKept, herr)
	}
	g.tell(a, rec, "pending")
	return &PendingError{ID: rec.Ref(), Err: herr}
}

// settle stores what had an effect (a 2xx, unless the work kept it itself
// or says it changed nothing) and releases the rest, so that a retry runs
// for real: a failure keeps its fingerprint (GiveBack), a success that
// changed nothing keeps nothing. It returns ErrSuperseded when a revoke
// superseded the intent while it ran (settled for good by then: an expected
// outcome, not a failure), and the store's error when the record could not
// be settled.
func (g *Guard) settle(a *attempt, resp Response, o Outcome, outcome string) error {
	rec := a.rec
	ctx, cancel := settleContext(a.parent)
	defer cancel()
	rec.ExternalRef = nullable(o.ExternalRef)
	var err error
	switch {
	case o.Kept: // completed by the work, with its local writes
	case resp.Status >= 200 && resp.Status < 300 && !o.NoEffect:
		err = g.cfg.Store.Complete(ctx, rec, resp, o, g.now())
	case resp.Status >= 200 && resp.Status < 300 && (rec.prior == nil || rec.prior.Status == StatusAbandoned):
		// A success that changed nothing (a domain the consumer already
		// held) binds nothing: the key is free, and a retry tells the truth
		// of its own time. Only a failure keeps its fingerprint.
		outcome = "released"
		err = g.cfg.Store.Release(ctx, rec)
	default:
		outcome = "released"
		err = g.cfg.Store.GiveBack(ctx, rec, g.now())
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
			"key_digest", g.cfg.Store.KeyDigest(rec.Key), "request_id", a.requestID, "error", err)
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
	if err := g.cfg.Store.GiveBack(ctx, a.rec, g.now()); err != nil {
		g.cfg.Log.Error("idempotency release failed", "key_digest", g.cfg.Store.KeyDigest(a.rec.Key), "error", err)
	}
}

// settleContext outlives the caller: the record must be settled even when
// the client has hung up.
func settleContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), 10*time.Second)
}
