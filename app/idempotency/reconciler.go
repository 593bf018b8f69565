package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/fault"
	"github.com/licensor-api/licensor/internal/ptr"
)

// ErrAbandon is returned (wrapped) by a Resume when the intent can never be
// finished (its input is no longer acceptable); the record becomes failed.
var ErrAbandon = errors.New("intent cannot be finished")

// Results of one reconciliation, as counted in metrics and reports.
const (
	resultCompleted  = "completed"  // the effect was found or made; the response is stored
	resultWaiting    = "waiting"    // nothing found yet, and too young to create
	resultRetry      = "retry"      // the vendor failed; tried again later
	resultFailed     = "failed"     // gave up after the last attempt
	resultAbandoned  = "abandoned"  // never started: nobody was promised anything; not executed
	resultSuperseded = "superseded" // made by a later intent, or revoked; not executed
)

// ReconcilerConfig is what a Reconciler needs; NewReconciler sets defaults.
type ReconcilerConfig struct {
	Store       *Store
	Operations  *Operations
	Settle      time.Duration // how old a record must be before a missing effect is created
	MaxAttempts int           // default 10
	// FailedInterval is how long a failed intent waits before it is tried
	// again, so that a long vendor outage heals by itself. Default an hour.
	FailedInterval time.Duration
	// Lease is how long a claim holds a record; also the grace before an
	// abandoned processing record is claimed. Default a minute.
	Lease time.Duration
	TTL   time.Duration // how long a completed record is replayed, from its completion
	// Backoff is the first wait after a failed attempt; it doubles each time,
	// capped at an hour. Default 15s.
	Backoff  time.Duration
	Interval time.Duration       // how often Run makes a pass; default Backoff
	Log      *slog.Logger        // nil: discard
	Now      func() time.Time    // nil: time.Now
	Observe  func(result string) // when set, told each result
	// Sweep, when set, runs at the end of every pass: work owed to the
	// vendor that no intent holds (a discarded site's delete that failed).
	// Its error is logged; the next pass runs it again.
	Sweep func(ctx context.Context) error
	// Jitter is the random part of a backoff, below max (nil: uniform
	// random), so that replicas do not retry in step.
	Jitter func(max time.Duration) time.Duration
	// LeaveBefore, when set, leaves alone every record created before it:
	// another vendor made them (the fake after the http driver), and this
	// one cannot know their outcome.
	LeaveBefore time.Time
}

// Reconciler settles pending intents: every serve process runs it in a loop,
// and `licensor reconcile` runs one pass.
type Reconciler struct {
	cfg ReconcilerConfig
}

// NewReconciler returns a Reconciler.
func NewReconciler(cfg ReconcilerConfig) *Reconciler {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.FailedInterval <= 0 {
		cfg.FailedInterval = time.Hour
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 15 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = cfg.Backoff
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string) {}
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func(max time.Duration) time.Duration { return rand.N(max) }
	}
	return &Reconciler{cfg: cfg}
}

// Reconciled is one intent a pass worked on, and what came of it.
type Reconciled struct {
	Intent    string // the intent's public id
	Operation string
	KeyDigest string
	Result    string // completed, waiting, retry, failed, abandoned or superseded
	Ref       string
}

// RunOnce claims every due pending record and tries to settle it.
func (r *Reconciler) RunOnce(ctx context.Context) ([]Reconciled, error) {
	now := r.now()
	// A processing record is abandoned once its lease has been over for a
	// whole lease more: the retry that takes it over normally comes first.
	// The query leaves out records before LeaveBefore, so they never fill a pass.
	recs, err := r.cfg.Store.duePending(ctx, now, now.Add(-r.cfg.Lease), r.cfg.LeaveBefore, 100)
	if err != nil {
		return nil, err
	}
	var out []Reconciled
	for i := range recs {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		s, ok := r.reconcile(ctx, &recs[i])
		if ok {
			out = append(out, s)
		}
	}
	r.clearSuperseded(ctx, now)
	if r.cfg.Sweep != nil && ctx.Err() == nil {
		if err := r.cfg.Sweep(ctx); err != nil {
			r.cfg.Log.Warn("reconciler sweep", "error", err)
		}
	}
	return out, nil
}

// clearSuperseded runs, for each intent superseded while its work may have
// reached the vendor, once its owner's lease is over (its vendor call has
// ended), its operation's BeforeDiscard: a create's site that its owner
// never learnt it made (it died, or lost the vendor's answer) is deleted
// unless a license holds it. Nothing else would: the intent is never
// resumed. The intent then counts as finished; a failed check is tried
// again a backoff later.
func (r *Reconciler) clearSuperseded(ctx context.Context, now time.Time) {
	recs, err := r.cfg.Store.dueClears(ctx, now, r.cfg.LeaveBefore, 100)
	if err != nil {
		r.cfg.Log.Error("list superseded intents to clear", "error", err)
		return
	}
	for i := range recs {
		rec := &recs[i]
		if ctx.Err() != nil {
			return
		}
		op, _ := r.cfg.Operations.lookup(rec.Operation)
		set := map[string]any{"phase": phaseFinished, "locked_until": nil, "updated_at": now}
		err := rec.sealedErr
		if err == nil && op.beforeDiscard != nil {
			err = op.beforeDiscard(ctx, rec)
		}
		if err != nil {
			r.cfg.Log.Warn("clear superseded intent", "intent", rec.ref(), "operation", rec.Operation,
				"key_digest", r.cfg.Store.KeyDigest(rec.Key), "error", err)
			set = map[string]any{"locked_until": now.Add(r.cfg.Backoff), "updated_at": now}
		}
		if _, err := r.cfg.Store.casUpdate(ctx, "clear superseded intent", rec, set); err != nil {
			r.cfg.Log.Error("clear superseded intent", "intent", rec.ref(), "error", err)
		}
	}
}

// dueClears lists superseded intents still to clear (see clearSuperseded)
// whose owner's lease is over.
func (s *Store) dueClears(ctx context.Context, now, since time.Time, limit int) ([]Record, error) {
	var recs []Record
	err := s.db.WithContext(ctx).
		Where("status = ? AND phase = ? AND (locked_until IS NULL OR locked_until <= ?) AND created_at >= ?", statusSuperseded, phaseStarted, now, since).
		Order("id").Limit(limit).Find(&recs).Error
	if err != nil {
		return nil, fmt.Errorf("list superseded records to clear: %w", err)
	}
	for i := range recs {
		if err := s.open(&recs[i].RequestBody, "request", recs[i].ID); err != nil {
			recs[i].RequestBody, recs[i].sealedErr = nil, err
		}
	}
	return recs, nil
}

// reconcile claims one record and works it; false when another reconciler
// claimed it first or the database failed.
func (r *Reconciler) reconcile(ctx context.Context, rec *Record) (Reconciled, bool) {
	now := r.now()
	if rec.Status == statusProcessing && !rec.mayHaveStarted() {
		return r.abandon(ctx, rec, now)
	}
	lease := now.Add(r.cfg.Lease)
	if won, err := r.cfg.Store.claim(ctx, rec, lease, now); err != nil || !won {
		if err != nil {
			r.cfg.Log.Error("claim pending record", "error", err)
		}
		return Reconciled{}, false
	}
	op, found := r.cfg.Operations.lookup(rec.Operation)
	if !found {
		r.cfg.Log.Error("no resumer for a pending operation", "operation", rec.Operation, "key_digest", r.cfg.Store.KeyDigest(rec.Key))
		if err := r.cfg.Store.postpone(ctx, rec, lease, now.Add(time.Hour), false, now, nil); err != nil { // nothing tried: no attempt
			r.cfg.Log.Error("postpone pending record", "key_digest", r.cfg.Store.KeyDigest(rec.Key), "error", err)
		}
		return Reconciled{}, false
	}
	// The work ends within the budget of the lease the claim took, counted
	// from the lease's start, as an owner's does.
	wctx, cancel := context.WithDeadline(ctx, workDeadline(lease, r.now(), r.cfg.Lease))
	defer cancel()
	expires := now.Add(r.cfg.TTL)
	if expires.Before(rec.ExpiresAt) {
		expires = rec.ExpiresAt
	}
	x := &Execution{Caller: Caller{ConsumerID: rec.ConsumerID, TokenID: ptr.Deref(rec.RequestedBy), RequestID: ptr.Deref(rec.CorrelationID)},
		store: r.cfg.Store, rec: rec, status: StatusPending, lease: lease, now: r.now, expires: &expires,
		attempt: &Attempt{Number: rec.Attempts + 1, Result: resultCompleted}}
	resp, done, err := Response{}, false, rec.sealedErr
	if err == nil { // else its request cannot be read under the keys held: tried again later
		resp, done, err = resume(wctx, op.resume, x, rec, !now.Before(rec.CreatedAt.Add(r.cfg.Settle)))
	}
	// What the attempt learnt is written even when the loop is stopping.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	result, settleErr := r.settle(sctx, x, resp, done, err)
	if settleErr != nil {
		r.cfg.Log.Error("settle pending record", "key_digest", r.cfg.Store.KeyDigest(rec.Key), "error", settleErr)
		return Reconciled{}, false
	}
	r.cfg.Observe(result)
	s := Reconciled{Intent: rec.ref(), Operation: rec.Operation, KeyDigest: r.cfg.Store.KeyDigest(rec.Key), Result: result, Ref: resp.ExternalRef}
	attrs := []any{"intent", s.Intent, "operation", s.Operation, "key_digest", s.KeyDigest, "consumer_id", rec.ConsumerID,
		"result", result, "attempts", rec.Attempts + 1, "vendor_ref", s.Ref, "correlation_id", ptr.Deref(rec.CorrelationID)}
	if err != nil { // no error=<nil> on a success
		attrs = append(attrs, "error", err)
	}
	r.cfg.Log.Info("reconciled", attrs...)
	return s, true
}

// resume calls the operation's Resume; a panic in it is a failed attempt,
// not the end of the process (which would claim the same record again).
func resume(ctx context.Context, fn func(context.Context, *Execution, *Record, bool) (Response, bool, error), x *Execution, rec *Record, mayCreate bool) (resp Response, done bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fault.New(classPanic, fmt.Sprintf("resumer panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	return fn(ctx, x, rec, mayCreate)
}

// abandon settles a processing record that never started: never executed.
func (r *Reconciler) abandon(ctx context.Context, rec *Record, now time.Time) (Reconciled, bool) {
	won, err := r.cfg.Store.abandon(ctx, rec, now)
	if err != nil || !won {
		if err != nil {
			r.cfg.Log.Error("abandon record", "key_digest", r.cfg.Store.KeyDigest(rec.Key), "error", err)
		}
		return Reconciled{}, false
	}
	r.cfg.Observe(resultAbandoned)
	s := Reconciled{Intent: rec.ref(), Operation: rec.Operation, KeyDigest: r.cfg.Store.KeyDigest(rec.Key), Result: resultAbandoned}
	r.cfg.Log.Info("reconciled", "intent", s.Intent, "operation", s.Operation, "key_digest", s.KeyDigest,
		"consumer_id", rec.ConsumerID, "result", s.Result, "correlation_id", ptr.Deref(rec.CorrelationID))
	return s, true
}

// settle writes what the attempt learnt, and the attempt in the same
// transaction (a Resume that called Finish wrote it there).
func (r *Reconciler) settle(ctx context.Context, x *Execution, resp Response, done bool, err error) (string, error) {
	rec, lease, now := x.rec, x.lease, r.now()
	attempt := func(result string, err error, next *time.Time) *Attempt {
		a := &Attempt{Number: rec.Attempts + 1, Result: result, Next: next}
		if err != nil {
			a.Class = errorClass(err)
		}
		return a
	}
	switch {
	case rec.sealedErr != nil:
		// Its request is sealed under a key this replica does not hold (a
		// rotation under way, mistyped keys): no attempt is counted, and it is
		// due again after the first backoff, for a replica that holds the key.
		return resultRetry, r.cfg.Store.postpone(ctx, rec, lease, now.Add(r.cfg.Backoff), false, now, nil)
	case err == nil && done && x.finished: // completed with its local writes, and its attempt
		return resultCompleted, nil
	case err == nil && done:
		return resultCompleted, r.cfg.Store.completeClaimed(ctx, rec, lease, resp, now, now.Add(r.cfg.TTL),
			attempt(resultCompleted, nil, nil))
	case errors.Is(err, ErrSuperseded):
		if serr := r.cfg.Store.supersedeClaimed(ctx, rec, lease, now, attempt(resultSuperseded, nil, nil)); serr != nil && !errors.Is(serr, ErrLeaseLost) {
			return resultSuperseded, serr
		}
		return resultSuperseded, nil // superseded now, or by the change that made it moot
	case err == nil: // nothing found, too young to create: due again once it is old enough
		next := rec.CreatedAt.Add(r.cfg.Settle)
		return resultWaiting, r.cfg.Store.postpone(ctx, rec, lease, next, false, now, attempt(resultWaiting, nil, &next))
	case errors.Is(err, ErrAbandon):
		r.cfg.Log.Error("intent cannot be finished: an operator should look", "operation", rec.Operation,
			"intent", rec.ref(), "consumer_id", rec.ConsumerID, "attempts", rec.Attempts+1, "error", err)
		return resultFailed, r.cfg.Store.fail(ctx, rec, lease, nil, now, attempt(resultFailed, err, nil))
	case rec.Attempts >= r.cfg.MaxAttempts:
		next := now.Add(r.cfg.FailedInterval)
		r.cfg.Log.Error("pending intent failed: an operator should look", "operation", rec.Operation,
			"intent", rec.ref(), "consumer_id", rec.ConsumerID, "attempts", rec.Attempts+1,
			"next_attempt", next, "error", err)
		return resultFailed, r.cfg.Store.fail(ctx, rec, lease, &next, now, attempt(resultFailed, err, &next))
	}
	next := now.Add(r.backoff(rec.Attempts))
	return resultRetry, r.cfg.Store.postpone(ctx, rec, lease, next, true, now, attempt(resultRetry, err, &next))
}

// backoff doubles from Backoff with each attempt, capped at an hour, with up
// to a quarter of random jitter so replicas do not retry in step.
func (r *Reconciler) backoff(attempts int) time.Duration {
	d := r.cfg.Backoff
	for i := 1; i < attempts && d < time.Hour; i++ {
		d *= 2
	}
	d = min(d, time.Hour)
	// In whole microseconds, as the tables keep times and the attempt's
	// event writes its next attempt.
	return (d + r.cfg.Jitter(d/4+1)).Truncate(time.Microsecond)
}

// Run reconciles every Interval (with jitter) until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Error("reconcile pass", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.cfg.Interval + rand.N(r.cfg.Interval/5+1)):
		}
	}
}

func (r *Reconciler) now() time.Time { return dbtime.Stamp(r.cfg.Now()) }

// duePending lists the records created since since to work, oldest first:
// pending ones due, processing ones whose lease ran out before
// abandonedBefore (no retry came to take them over), and failed ones due
// for their slow retry.
func (s *Store) duePending(ctx context.Context, now, abandonedBefore, since time.Time, limit int) ([]Record, error) {
	var recs []Record
	err := s.db.WithContext(ctx).
		Where("((status = ? AND (locked_until IS NULL OR locked_until <= ?)) OR (status = ? AND locked_until <= ?) OR (status = ? AND locked_until <= ?)) "+
			"AND created_at >= ?", StatusPending, now, statusProcessing, abandonedBefore, StatusFailed, now, since).
		Order("id").Limit(limit).Find(&recs).Error
	if err != nil {
		return nil, fmt.Errorf("list due pending records: %w", err)
	}
	for i := range recs { // a record the current keys cannot open is the reconciler's to report, not the pass's end
		if err := s.open(&recs[i].RequestBody, "request", recs[i].ID); err != nil {
			recs[i].RequestBody, recs[i].sealedErr = nil, err
		}
	}
	return recs, nil
}

// claim leases a listed record to the caller until lease, as pending: of
// several replicas reading it, exactly one wins.
func (s *Store) claim(ctx context.Context, read *Record, lease time.Time, now time.Time) (bool, error) {
	return s.casUpdate(ctx, "claim pending record", read, map[string]any{"status": StatusPending, "locked_until": lease, "updated_at": now})
}

// casUpdate applies set to read if it is as read (casWhere).
func (s *Store) casUpdate(ctx context.Context, what string, read *Record, set map[string]any) (bool, error) {
	res := database.RetryOnConflict(ctx, func() *gorm.DB {
		return casWhere(s.db.WithContext(ctx).Model(&Record{}), read).Updates(set)
	})
	if res.Error != nil {
		return false, fmt.Errorf("%s: %w", what, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// updateClaimed updates a pending record the caller holds with lease, and
// records a (nil: nothing) in the same transaction, only when the update
// changed the record: an attempt is on record if and only if its change is.
func (s *Store) updateClaimed(ctx context.Context, r *Record, lease time.Time, set map[string]any, a *Attempt, now time.Time) error {
	var res *gorm.DB
	err := database.Transact(ctx, s.db, database.RetryOnConflict, func(tx *gorm.DB) error {
		res = leaseHeld(tx.Model(&Record{}), r, StatusPending, &lease).Updates(set)
		if res.Error != nil || res.RowsAffected != 1 || a == nil {
			return res.Error // nothing changed, or no attempt to record
		}
		return recordAttempt(tx, r, a, now)
	})
	if err != nil {
		return fmt.Errorf("settle pending record: %w", err)
	}
	if res.RowsAffected != 1 {
		return ErrLeaseLost
	}
	return nil
}

// completeClaimed stores the response that finishes a claimed record, to be
// replayed until expires (never earlier than the record's own expiry).
func (s *Store) completeClaimed(ctx context.Context, r *Record, lease time.Time, resp Response, now, expires time.Time, a *Attempt) error {
	if expires.Before(r.ExpiresAt) {
		expires = r.ExpiresAt
	}
	set, err := s.completed(resp, now)
	if err != nil {
		return err
	}
	set["attempts"], set["expires_at"] = gorm.Expr("attempts + 1"), expires
	return s.updateClaimed(ctx, r, lease, set, a, now)
}

// supersedeClaimed settles a claimed record as superseded.
func (s *Store) supersedeClaimed(ctx context.Context, r *Record, lease time.Time, now time.Time, a *Attempt) error {
	return s.updateClaimed(ctx, r, lease, map[string]any{
		"status": statusSuperseded, "phase": phaseFinished, "locked_until": nil, "attempts": gorm.Expr("attempts + 1"), "updated_at": now,
	}, a, now)
}

// postpone leaves a claimed record pending until next; failed says whether
// the attempt counts (a vendor error) or not (too young to act on).
func (s *Store) postpone(ctx context.Context, r *Record, lease, next time.Time, failed bool, now time.Time, a *Attempt) error {
	set := map[string]any{"locked_until": next, "updated_at": now}
	if failed {
		set["attempts"] = gorm.Expr("attempts + 1")
	}
	return s.updateClaimed(ctx, r, lease, set, a, now)
}

// fail gives up on a claimed record for now; when next is not nil the
// reconciler tries it again then.
func (s *Store) fail(ctx context.Context, r *Record, lease time.Time, next *time.Time, now time.Time, a *Attempt) error {
	return s.updateClaimed(ctx, r, lease, map[string]any{
		"status": StatusFailed, "locked_until": next, "attempts": gorm.Expr("attempts + 1"), "updated_at": now,
	}, a, now)
}

// prune deletes expired prunable records in batches, each its own short
// statement, so no delete holds locks for long.
func (s *Store) prune(ctx context.Context, now time.Time, batch int) (int64, error) {
	var total int64
	for {
		var ids []uint64
		err := s.db.WithContext(ctx).Model(&Record{}).
			Where("expires_at <= ? AND status IN ?", now, prunable).
			Order("id").Limit(batch).Pluck("id", &ids).Error
		if err != nil {
			return total, fmt.Errorf("list expired records: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		res := database.RetryOnConflict(ctx, func() *gorm.DB {
			return s.db.WithContext(ctx).Where("id IN ? AND expires_at <= ? AND status IN ?", ids, now, prunable).Delete(&Record{})
		})
		if res.Error != nil {
			return total, fmt.Errorf("delete expired records: %w", res.Error)
		}
		total += res.RowsAffected
		if len(ids) < batch {
			return total, nil
		}
	}
}

// prunable are the statuses the pruner deletes once expired: settled ones.
// An accepted intent is never dropped: a failed one is kept, retried on the
// slow schedule, until it completes or an operator discards it.
var prunable = []string{StatusCompleted, statusAbandoned, statusSuperseded, StatusDiscarded}
