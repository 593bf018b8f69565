package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
)

// Caller is who asks for an operation: the consumer its key is scoped to,
// the token that asked ("" for none) and the request's id, kept as the
// record's correlation id.
type Caller struct {
	ConsumerID string
	TokenID    string
	RequestID  string
}

// Execution is one run of an intent by the caller that holds its record's
// lease (a request, a webhook, the reconciler's claim), as atomic phases:
// each one a short transaction that also moves the record to its next
// recovery point. A guarded operation runs
//
//	reserved ─ local reads ─► Start ─► the vendor call (no transaction) ─► Finish
//
// Reserved is the phase the record is inserted in. Start records that the
// vendor may hear of the intent from now on. Finish commits the effect's
// local writes and the answer in one transaction. An error between them
// says what became of the intent (see Operation.Run).
type Execution struct {
	Caller
	store  *Store
	rec    *Record
	status string    // the record's status while it is owned: processing, or pending for a claim
	lease  time.Time // the lease the owner set
	now    func() time.Time
	// expires, for a claim, is the end of the replay window counted from
	// the completion; nil: the record's own.
	expires *time.Time
	// attempt, for a claim, is the reconciler's attempt a completion
	// records (its intent.attempted event, in Finish's transaction).
	attempt *Attempt
	// finished says Finish committed: the answer is on the record.
	finished bool
}

// IntentID is the public id of the intent: what the effect keeps to know
// which intent made it.
func (x *Execution) IntentID() string { return x.rec.Ref() }

// Start is the phase before the vendor may hear of the intent: from here a
// crash leaves an intent the reconciler finishes by looking at the vendor;
// before it, one it abandons, since nobody was promised anything. The
// operation must not reach out when Start fails: it does for a retry of a
// superseded intent (ErrSuperseded), which answers only what it finds.
func (x *Execution) Start(ctx context.Context) error {
	if p := x.rec.prior; p != nil && p.Status == StatusSuperseded {
		// A retry of a superseded intent answers what it finds, but never
		// reaches out: the consumer may have revoked what superseded it.
		return ErrSuperseded
	}
	res := x.store.write(ctx, func(db *gorm.DB) *gorm.DB {
		return leaseHeld(db.Model(&Record{}), x.rec, x.status, &x.lease).
			Updates(map[string]any{"phase": PhaseStarted, "updated_at": x.now()})
	})
	if res.Error != nil {
		return fmt.Errorf("%w: %w", ErrNotRecorded, res.Error)
	}
	if res.RowsAffected != 1 {
		return x.store.whyNotOwned(x.store.db.WithContext(ctx), x.rec)
	}
	return nil
}

// Finish is the last phase: effect writes the intent's local effect in tx
// and returns the answer, which is stored on the record in the same
// transaction, so that the effect and the answer commit together or not at
// all. Older open intents of the consumer for the same subject (of the same
// operation) are superseded in it too, and a reconciler's attempt is
// written in it. The transaction runs again, whole, while it loses a lock
// conflict: effect must write only what it was given. Finish fails, and
// rolls the effect back, when the caller no longer owns the record
// (ErrLeaseLost) or the intent was superseded meanwhile (ErrSuperseded),
// or with effect's error as it is.
func (x *Execution) Finish(ctx context.Context, effect func(tx *gorm.DB) (Response, error)) (Response, error) {
	var resp Response
	err := transact(ctx, x.store.db, func(tx *gorm.DB) (err error) {
		if resp, err = effect(tx); err != nil {
			return err
		}
		return x.complete(tx, resp)
	})
	if err != nil {
		return Response{}, err
	}
	x.finished = true
	return resp, nil
}

// complete stores resp as the intent's answer in tx.
func (x *Execution) complete(tx *gorm.DB, resp Response) error {
	now := x.now()
	set, err := x.store.completed(resp, now)
	if err != nil {
		return err
	}
	set["phase"] = PhaseFinished
	if x.expires != nil {
		set["attempts"], set["expires_at"] = gorm.Expr("attempts + 1"), *x.expires
	}
	res := leaseHeld(tx.Model(&Record{}), x.rec, x.status, &x.lease).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("complete idempotency record: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return x.store.whyNotOwned(tx, x.rec)
	}
	if x.attempt != nil {
		if err := recordAttempt(tx, x.rec, x.attempt, now); err != nil {
			return err
		}
	}
	if x.rec.Subject == nil {
		return nil
	}
	return x.store.supersede(tx, x.rec.ConsumerID, x.rec.Operation, *x.rec.Subject, x.rec.ID, now)
}

// Supersede settles, in tx, every open intent of the caller's consumer for
// operation about subject: the effect has made them moot (a revoke of the
// license a create was for).
func (x *Execution) Supersede(tx *gorm.DB, operation, subject string) error {
	return x.store.supersede(tx, x.rec.ConsumerID, operation, subject, 0, x.now())
}

// transact runs fn in one transaction on db, and again, whole, while it
// loses a lock conflict (a deadlock rolled all of it back).
func transact(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) error {
	return database.RetryOnConflict(ctx, func() *gorm.DB {
		return &gorm.DB{Error: db.WithContext(ctx).Transaction(fn)}
	}).Error
}

// ErrSuperseded answers a request whose intent was superseded while it ran
// (the consumer revoked the license of its domain meanwhile): its writes
// are rolled back (409 intent_superseded). A Resume returns it (wrapped)
// when it finds the effect made by another intent.
var ErrSuperseded error = &ownerRefusal{"intent superseded by a later one"}

// ErrLeaseLost means the caller no longer owns the record: its lease ran out
// and another owner took it over (409 request_in_progress to a request).
var ErrLeaseLost error = &ownerRefusal{"idempotency lease lost"}

// ownerRefusal is an error of an owner's phase (Start, Finish) that refuses
// the change: the operation rolls its writes back and answers it, and does
// not take it for an unknown outcome.
type ownerRefusal struct{ msg string }

func (e *ownerRefusal) Error() string { return e.msg }

// isRefusal reports whether err is an owner's refusal: the caller no longer
// owns the record (lost, or superseded), so it neither settles nor releases it.
func isRefusal(err error) bool {
	var r *ownerRefusal
	return errors.As(err, &r)
}
