package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// ErrSuperseded answers a request whose intent was superseded while it ran
// (the consumer revoked the license of its domain meanwhile): its writes
// are rolled back (409 intent_superseded). A Resume returns it (wrapped)
// when it finds the effect made by another intent.
var ErrSuperseded error = &ownerRefusal{"intent superseded by a later one"}

// ownerRefusal is an error of an owner's step (Started, Complete) that
// refuses the change: the domain rolls its writes back and answers it, and
// does not take it for an unknown outcome (CallerRefusal).
type ownerRefusal struct{ msg string }

func (e *ownerRefusal) Error() string { return e.msg }

// CallerRefusal says the change was refused by its caller, not failed.
func (e *ownerRefusal) CallerRefusal() bool { return true }

// isRefusal reports whether err is an owner's refusal: the caller no longer
// owns the record (lost, or superseded), so it neither settles nor releases it.
func isRefusal(err error) bool {
	var r *ownerRefusal
	return errors.As(err, &r)
}

// owner is one execution of a record by the caller that holds its lease (a
// request's Serve, Do, or the reconciler's claim): what the work's recovery
// points are written to.
type owner struct {
	store  *Store
	rec    *Record
	status string    // the record's status while it is owned: processing, or pending for a claim
	lease  time.Time // the lease the owner set
	now    func() time.Time
	// expires, for a claim, is the end of the replay window counted from
	// the completion; nil: the record's own.
	expires *time.Time
	// completes, for a claim, is the reconciler's attempt a completion
	// records (its intent.attempted event, in the completion's
	// transaction); nil: no attempt to record.
	completes *Attempt
}

// Intent is the public id of the intent the call executes, "" outside the
// guard: what the effect keeps to know which intent made it.
func (c Call) Intent() string {
	if c.owner == nil {
		return ""
	}
	return c.owner.rec.Ref()
}

// Started records the recovery point before the work may reach the vendor:
// from here a crash leaves an intent the reconciler finishes by looking at
// the vendor; before it, one it abandons, since nobody was promised
// anything. The work must not reach out when Started fails: it does when
// the call retries a superseded intent (ErrSuperseded), which answers only
// what it finds. Outside the guard it does nothing.
func (c Call) Started(ctx context.Context) error {
	o := c.owner
	if o == nil {
		return nil
	}
	if p := o.rec.prior; p != nil && p.Status == StatusSuperseded {
		// A retry of a superseded intent answers what it finds, but never
		// reaches out: the consumer may have revoked what superseded it.
		return ErrSuperseded
	}
	res := o.store.write(ctx, func(db *gorm.DB) *gorm.DB {
		return leaseHeld(db.Model(&Record{}), o.rec, o.status, &o.lease).
			Updates(map[string]any{"phase": PhaseStarted, "updated_at": o.now()})
	})
	if res.Error != nil {
		return fmt.Errorf("%w: %w", ErrNotRecorded, res.Error)
	}
	if res.RowsAffected != 1 {
		return o.store.whyNotOwned(o.store.db.WithContext(ctx), o.rec)
	}
	return nil
}

// Complete stores resp as the intent's outcome in tx, the transaction that
// writes the work's local effects, so that the effect and the answer commit
// together or not at all; older open intents of the consumer for the same
// subject (of the same operation) are superseded in it too. For the
// reconciler's claim, the attempt's intent.attempted event is written in
// tx as well: the attempt shares the domain's transaction (the licenses'
// one that writes a license or its revocation, its audit and consumer
// events), so a crash anywhere before its COMMIT leaves neither the change,
// the completion nor the attempt, and the claim lapses for the next
// attempt, which finds the vendor's effect. The work then returns its
// Outcome with Kept set. It fails, and so rolls tx back, when
// the caller no longer owns the record (ErrLeaseLost) or the intent was
// superseded meanwhile (ErrSuperseded). Outside the guard it does nothing.
func (c Call) Complete(tx *gorm.DB, resp Response, out Outcome) error {
	o := c.owner
	if o == nil {
		return nil
	}
	now := o.now()
	set, err := o.store.completed(resp, out, now)
	if err != nil {
		return err
	}
	set["phase"] = PhaseFinished
	if o.expires != nil {
		set["attempts"], set["expires_at"] = gorm.Expr("attempts + 1"), *o.expires
	}
	res := leaseHeld(tx.Model(&Record{}), o.rec, o.status, &o.lease).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("complete idempotency record: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return o.store.whyNotOwned(tx, o.rec)
	}
	if o.completes != nil {
		if err := recordAttempt(tx, o.rec, o.completes, now); err != nil {
			return err
		}
	}
	if o.rec.Subject == nil {
		return nil
	}
	return o.store.supersede(tx, o.rec.ConsumerID, o.rec.Operation, *o.rec.Subject, o.rec.ID, now)
}

// Supersede settles, in tx, every open intent of the call's consumer for
// operation about subject: the work has made them moot (a revoke of the
// license a create was for). Outside the guard it does nothing.
func (c Call) Supersede(tx *gorm.DB, operation, subject string) error {
	o := c.owner
	if o == nil {
		return nil
	}
	return o.store.supersede(tx, o.rec.ConsumerID, operation, subject, 0, o.now())
}

// openStatuses are the statuses of an intent not settled for good.
var openStatuses = []string{StatusProcessing, StatusPending, StatusFailed, StatusAbandoned}

// supersede marks the consumer's open intents of operation about subject
// superseded: when beforeID is not 0, only those inserted before that
// record, and not one whose owner is at work on it right now (processing,
// its lease alive), which finishes on its own and answers what it finds.
// The ones to settle are read first (a plain read, no range lock), then
// updated by id, still open: a change that finds none writes nothing.
func (s *Store) supersede(tx *gorm.DB, consumerID, operation, subject string, beforeID uint64, now time.Time) error {
	q := tx.Model(&Record{}).Where("consumer_id = ? AND subject = ? AND operation = ? AND status IN ?", consumerID, subject, operation, openStatuses)
	if beforeID > 0 {
		q = q.Where("id < ?", beforeID).Where("NOT (status = ? AND locked_until > ?)", StatusProcessing, now)
	}
	var ids []uint64
	if err := q.Pluck("id", &ids).Error; err != nil {
		return fmt.Errorf("find older intents: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	u := tx.Model(&Record{}).Where("id IN ? AND status IN ?", ids, openStatuses)
	if beforeID > 0 { // the exclusion again: one may have been taken over since it was read
		u = u.Where("NOT (status = ? AND locked_until > ?)", StatusProcessing, now)
	}
	err := u.Updates(map[string]any{"status": StatusSuperseded, "phase": PhaseFinished, "locked_until": nil, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("supersede older intents: %w", err)
	}
	return nil
}

// whyNotOwned tells why an owner's write matched no row: the intent was
// superseded, or the lease was lost.
func (s *Store) whyNotOwned(db *gorm.DB, r *Record) error {
	var status string
	if err := db.Model(&Record{}).Where("id = ?", r.ID).Select("status").Scan(&status).Error; err != nil {
		return fmt.Errorf("read idempotency record: %w", err)
	}
	if status == StatusSuperseded {
		return ErrSuperseded
	}
	return ErrLeaseLost
}

// Abandon settles a processing record whose owner went before its work
// could have reached the vendor (phase reserved): nobody was promised
// anything, so it is never executed by the reconciler, and a retry with its
// key runs it for real. False when the record changed meanwhile.
func (s *Store) Abandon(ctx context.Context, read *Record, now time.Time) (bool, error) {
	res := s.write(ctx, func(db *gorm.DB) *gorm.DB {
		return casWhere(db.Model(&Record{}), read).Where("status = ? AND phase = ?", StatusProcessing, PhaseReserved).
			Updates(map[string]any{"status": StatusAbandoned, "locked_until": nil, "updated_at": now})
	})
	if res.Error != nil {
		return false, fmt.Errorf("abandon idempotency record: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// GiveBack ends an execution that had no effect on r, which it owns, so
// that a retry with the same request runs for real. A fresh intent under a
// client's key is kept abandoned until it expires, for its fingerprint
// alone: the key stays bound to its request (another request with it is
// ErrKeyReused), nothing of the failure is stored or replayed, and the
// reconciler never executes it. One under a key the server made is
// released (deleted): no client can send its key again. An intent it took
// over keeps what it was owed: a superseded one is superseded again; one
// that may have reached the vendor before (it had started, or failed after
// a 202) goes back to pending, due now, so that the reconciler finishes it:
// a retry's definite failure says nothing of the first execution's effect.
func (s *Store) GiveBack(ctx context.Context, r *Record, now time.Time) error {
	p := r.prior
	switch {
	case p == nil && strings.HasPrefix(r.Key, autoPrefix):
		return s.Release(ctx, r)
	case p == nil, p.Status == StatusAbandoned, !p.mayHaveStarted() && p.Status != StatusSuperseded:
		return s.settle(ctx, r, map[string]any{"status": StatusAbandoned, "locked_until": nil, "updated_at": now})
	case p.Status == StatusSuperseded:
		return s.settle(ctx, r, map[string]any{"status": StatusSuperseded, "phase": PhaseFinished, "locked_until": nil, "updated_at": now})
	}
	return s.settle(ctx, r, map[string]any{"status": StatusPending, "locked_until": nil, "updated_at": now})
}
