package idempotency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/database"
)

// Discard settles a failed or abandoned intent for good, on behalf of by,
// as Store.Discard does (the same errors), after its operation's
// BeforeDiscard has made sure the vendor keeps nothing for it that nobody
// holds, when its work may have reached the vendor. For that while the
// intent is claimed (processing, under a lease), so that neither a client's
// retry (409 request_in_progress) nor the reconciler can run it between
// the vendor's check and the discard. When BeforeDiscard fails the intent
// is put back as it was and its error returned (the vendor could not be
// asked: nothing changed). The claim marks the intent as never started
// (phase reserved; put back as it was): a crash while it is claimed leaves
// it processing, and the reconciler then abandons it once its lease ends,
// as it does any intent the vendor never heard of, rather than resume the
// create the discard was meant to end (its site, if the crash came before
// the delete, is one no license holds: drift reports it). A client's retry
// with its key and body may take it over then, as any abandoned intent.
func (g *Guard) Discard(ctx context.Context, by audit.Actor, id, reason string) (Intent, error) {
	s, retryOnly := g.cfg.Store, g.cfg.Operations.RetryOnly()
	if _, err := audit.Reason(reason); err != nil {
		return Intent{}, err
	}
	rec, err := s.discardable(ctx, id)
	if err != nil {
		return Intent{}, err
	}
	op, _ := g.cfg.Operations.lookup(rec.Operation)
	check := op.beforeDiscard
	if check == nil || !rec.mayHaveStarted() || !slices.Contains(Discardable, rec.Status) || slices.Contains(retryOnly, rec.Operation) {
		return s.Discard(ctx, by, id, reason, g.now(), retryOnly...)
	}
	if err := by.Check(); err != nil {
		return Intent{}, err
	}
	busy, err := s.subjectBusy(ctx, rec)
	if err != nil {
		return Intent{}, err
	}
	if busy {
		return Intent{}, ErrSubjectBusy
	}
	now := g.now()
	lease := now.Add(g.cfg.LockTimeout)
	won, err := s.claimForDiscard(ctx, rec, lease, now)
	if err != nil {
		return Intent{}, err
	}
	if !won { // taken over, or changed, since it was read
		in, err := s.Intent(ctx, "", id)
		if err != nil {
			return Intent{}, err
		}
		return in, ErrNotDiscardable
	}
	work, cancel := detach(ctx, workDeadline(lease, now, g.cfg.LockTimeout))
	defer cancel()
	if err := check(work, rec); err != nil {
		g.putBack(ctx, rec, lease)
		return Intent{}, err
	}
	in, err := s.discard(ctx, by, id, reason, g.now(), []string{StatusProcessing}, &lease, retryOnly...)
	if err != nil { // the discard and its event did not commit: the intent is as it was
		g.putBack(ctx, rec, lease)
	}
	return in, err
}

// putBack gives back an intent Discard claimed and did not discard, as it
// was; one whose claim was lost meanwhile is its new owner's.
func (g *Guard) putBack(ctx context.Context, rec *Record, lease time.Time) {
	put, cancel := settleContext(ctx)
	defer cancel()
	if err := g.cfg.Store.unclaim(put, rec, lease); err != nil && !errors.Is(err, ErrLeaseLost) {
		g.cfg.Log.Error("put back an intent whose discard failed", "intent", rec.Ref(), "error", err)
	}
}

// subjectBusy reports whether another intent of read's operation for the
// same subject, of any consumer, is open (pending or processing): the
// vendor's site for that subject may be its own.
func (s *Store) subjectBusy(ctx context.Context, read *Record) (bool, error) {
	if read.Subject == nil {
		return false, nil
	}
	var n int64
	err := s.db.WithContext(ctx).Model(&Record{}).Where("operation = ? AND subject = ? AND id <> ? AND status IN ?",
		read.Operation, *read.Subject, read.ID, []string{StatusPending, StatusProcessing}).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("find the open intents of the subject: %w", err)
	}
	return n > 0, nil
}

// discardable reads the intent id with everything its operation's
// BeforeDiscard may need (its subject, phase and stored request).
func (s *Store) discardable(ctx context.Context, id string) (*Record, error) {
	var r Record
	err := s.db.WithContext(ctx).Where("public_id = ?", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrIntentNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find intent: %w", err)
	}
	if err := s.openRequest(&r); err != nil {
		r.RequestBody, r.sealedErr = nil, err
	}
	return &r, nil
}

// claimForDiscard makes read processing under lease, as it was read: false
// when it changed meanwhile.
func (s *Store) claimForDiscard(ctx context.Context, read *Record, lease, now time.Time) (bool, error) {
	res := database.RetryOnConflict(ctx, func() *gorm.DB {
		return casWhere(s.db.WithContext(ctx).Model(&Record{}), read).
			Updates(map[string]any{"status": StatusProcessing, "phase": PhaseReserved, "locked_until": lease, "updated_at": now})
	})
	if res.Error != nil {
		return false, fmt.Errorf("claim intent for discard: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// unclaim puts back what claimForDiscard changed on read, while the claim
// under lease is still held.
func (s *Store) unclaim(ctx context.Context, read *Record, lease time.Time) error {
	res := database.RetryOnConflict(ctx, func() *gorm.DB {
		return leaseHeld(s.db.WithContext(ctx).Model(&Record{}), read, StatusProcessing, &lease).
			Updates(map[string]any{"status": read.Status, "phase": read.Phase, "locked_until": read.LockedUntil, "updated_at": read.UpdatedAt})
	})
	if res.Error != nil {
		return fmt.Errorf("put back intent: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return ErrLeaseLost
	}
	return nil
}
