package idempotency

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
)

// duePending lists the records a reconciler should work, oldest first:
// pending records whose next attempt is due, processing records whose
// owner's lease ran out before abandonedBefore (the process died and no
// retry came to take them over), and failed records due for their slow
// retry (a failed record with no next attempt waits for an operator), of
// those created since since (zero: all). It is a background scan across
// consumers; claiming one is a separate compare-and-set.
func (s *Store) duePending(ctx context.Context, now, abandonedBefore, since time.Time, limit int) ([]Record, error) {
	var recs []Record
	err := s.db.WithContext(ctx).
		Where("((status = ? AND (locked_until IS NULL OR locked_until <= ?)) OR (status = ? AND locked_until <= ?) OR (status = ? AND locked_until <= ?)) "+
			"AND created_at >= ?", StatusPending, now, StatusProcessing, abandonedBefore, StatusFailed, now, since).
		Order("id").Limit(limit).Find(&recs).Error
	if err != nil {
		return nil, fmt.Errorf("list due pending records: %w", err)
	}
	for i := range recs { // a record the current keys cannot open is the reconciler's to report, not the pass's end
		if err := s.openRequest(&recs[i]); err != nil {
			recs[i].RequestBody, recs[i].sealedErr = nil, err
		}
	}
	return recs, nil
}

// claim leases a record DuePending listed to the caller until lease, as a
// pending record: of several reconcilers (replicas) reading the same record,
// exactly one wins.
func (s *Store) claim(ctx context.Context, read *Record, lease time.Time, now time.Time) (bool, error) {
	res := database.RetryOnConflict(ctx, func() *gorm.DB {
		return casWhere(s.db.WithContext(ctx).Model(&Record{}), read).
			Updates(map[string]any{"status": StatusPending, "locked_until": lease, "updated_at": now})
	})
	if res.Error != nil {
		return false, fmt.Errorf("claim pending record: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// updateClaimed updates a pending record the caller holds with lease. When
// a is not nil, the update and a's intent.attempted audit event are one
// transaction, the event written only when the update changed the record:
// an attempt is in the trail if and only if what it did to the record
// committed (a lost lease writes neither). A crash before the UPDATE,
// between it and the INSERT, or before the COMMIT leaves both undone: the
// record is still claimed, due again once the lease ends, and the attempt
// is not on record (the next one is).
func (s *Store) updateClaimed(ctx context.Context, r *Record, lease time.Time, set map[string]any, a *Attempt, now time.Time) error {
	if a == nil {
		return checkOne(database.RetryOnConflict(ctx, func() *gorm.DB {
			return leaseHeld(s.db.WithContext(ctx).Model(&Record{}), r, StatusPending, &lease).Updates(set)
		}))
	}
	var res *gorm.DB
	err := database.RetryOnConflict(ctx, func() *gorm.DB {
		return &gorm.DB{Error: s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			res = leaseHeld(tx.Model(&Record{}), r, StatusPending, &lease).Updates(set)
			if res.Error != nil || res.RowsAffected != 1 {
				return res.Error // nothing changed: no attempt to record
			}
			return recordAttempt(tx, r, a, now)
		})}
	}).Error
	if err != nil {
		return fmt.Errorf("settle pending record: %w", err)
	}
	return checkOne(res)
}

// completeClaimed stores the response that finishes a claimed pending record,
// to be replayed until expires (never earlier than the record's own expiry),
// and records a (nil: nothing) in the same transaction.
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

// supersedeClaimed settles a claimed record as superseded: its effect was
// made by a later intent, or the consumer revoked it. It records a (nil:
// nothing) in the same transaction.
func (s *Store) supersedeClaimed(ctx context.Context, r *Record, lease time.Time, now time.Time, a *Attempt) error {
	return s.updateClaimed(ctx, r, lease, map[string]any{
		"status": StatusSuperseded, "phase": PhaseFinished, "locked_until": nil, "attempts": gorm.Expr("attempts + 1"), "updated_at": now,
	}, a, now)
}

// postpone leaves a claimed record pending until next; failed says whether
// the attempt counts (a vendor error) or not (too young to act on). It
// records a in the same transaction; a nil a is no attempt (nothing was
// tried) and records nothing.
func (s *Store) postpone(ctx context.Context, r *Record, lease, next time.Time, failed bool, now time.Time, a *Attempt) error {
	set := map[string]any{"locked_until": next, "updated_at": now}
	if failed {
		set["attempts"] = gorm.Expr("attempts + 1")
	}
	return s.updateClaimed(ctx, r, lease, set, a, now)
}

// fail gives up on a claimed record for now: a retry with its key executes
// again, an operator may put it back (RetryFailed), and when next is not nil
// the reconciler tries it again then, on its slow schedule. It records a
// (nil: nothing) in the same transaction.
func (s *Store) fail(ctx context.Context, r *Record, lease time.Time, next *time.Time, now time.Time, a *Attempt) error {
	return s.updateClaimed(ctx, r, lease, map[string]any{
		"status": StatusFailed, "locked_until": next, "attempts": gorm.Expr("attempts + 1"), "updated_at": now,
	}, a, now)
}

func checkOne(res *gorm.DB) error {
	if res.Error != nil {
		return fmt.Errorf("settle pending record: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return ErrLeaseLost
	}
	return nil
}

// PendingStats returns how many records are pending and when the oldest was
// created (zero when none).
func (s *Store) PendingStats(ctx context.Context) (count int64, oldest time.Time, err error) {
	q := func() *gorm.DB { return s.db.WithContext(ctx).Model(&Record{}).Where("status = ?", StatusPending) }
	if err := q().Count(&count).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("count pending records: %w", err)
	}
	// The oldest row's own column, not MIN(): SQLite returns an aggregate
	// of a DATETIME column as text.
	var created []time.Time
	if err := q().Order("created_at").Limit(1).Pluck("created_at", &created).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("oldest pending record: %w", err)
	}
	if len(created) > 0 {
		oldest = created[0]
	}
	return count, oldest, nil
}

// prune deletes expired settled records (prunable) in batches of batch
// ids, each batch its own short statement, so no delete holds locks for
// long. Pending, processing and failed records are never pruned: an intent
// the server accepted is settled (by the reconciler, or an operator's
// discard), not dropped.
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

// prunable are the statuses the pruner deletes once expired: settled ones
// (abandoned, superseded and discarded intents were never executed after
// they settled). A failed intent is kept, visible and retried on the slow
// schedule, until it completes or an operator discards it. The audit
// events of a pruned intent are kept.
var prunable = []string{StatusCompleted, StatusAbandoned, StatusSuperseded, StatusDiscarded}
