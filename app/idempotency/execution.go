package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
)

// Caller is who asks for an operation.
type Caller struct {
	ConsumerID string // the consumer its key is scoped to
	TokenID    string // "" for none
	RequestID  string // kept as the record's correlation id
}

// Execution is one run of an intent by the caller that holds its record's
// lease (a request, a webhook, the reconciler's claim), as atomic phases:
// each one a short transaction that also moves the record to its next
// recovery point. A guarded operation runs
//
//	reserved ─ local reads ─► Start ─► the vendor call (no transaction) ─► Finish
//
// An error between them says what became of the intent (see Operation.Run).
type Execution struct {
	Caller
	store  *Store
	rec    *Record
	status string    // the record's status while it is owned: processing, or pending for a claim
	lease  time.Time // the lease the owner set
	now    func() time.Time
	// For a claim: the end of the replay window counted from the completion
	// (nil: the record's own), and the attempt Finish's transaction records.
	expires  *time.Time
	attempt  *Attempt
	finished bool // Finish committed: the answer is on the record
}

// IntentID is the intent's public id, which the effect keeps.
func (x *Execution) IntentID() string { return x.rec.ref() }

// MayHaveStarted reports whether an earlier run of this intent may have
// reached the vendor: this execution took over a record past Start (its
// owner crashed, or it had failed). An operation whose vendor call is not
// safe to repeat looks at the vendor first, as its Resume does.
func (x *Execution) MayHaveStarted() bool { return x.rec.prior != nil && x.rec.prior.mayHaveStarted() }

// Began is when the intent was first recorded, kept across a take-over.
func (x *Execution) Began() time.Time {
	if p := x.rec.prior; p != nil {
		return p.CreatedAt
	}
	return x.rec.CreatedAt
}

// Start is the phase before the vendor may hear of the intent: from here a
// crash leaves an intent the reconciler finishes by looking at the vendor;
// before it, one it abandons, since nobody was promised anything. The
// operation must not reach out when Start fails.
func (x *Execution) Start(ctx context.Context) error {
	if p := x.rec.prior; p != nil && p.Status == statusSuperseded {
		// A retry of a superseded intent answers only what it finds: the
		// consumer may have revoked what superseded it.
		return ErrSuperseded
	}
	res := x.store.write(ctx, func(db *gorm.DB) *gorm.DB {
		return leaseHeld(db.Model(&Record{}), x.rec, x.status, &x.lease).
			Updates(map[string]any{"phase": phaseStarted, "updated_at": x.now()})
	})
	if res.Error != nil {
		return fmt.Errorf("%w: %w", ErrNotRecorded, res.Error)
	}
	if res.RowsAffected != 1 {
		return x.store.whyNotOwned(x.store.db.WithContext(ctx), x.rec)
	}
	return nil
}

// Held reports whether x still holds its intent: nil while its lease is
// as x took it (even past its time, until another takes it over);
// ErrSuperseded or ErrLeaseLost once not. It reads detached from ctx's end
// (a work context that ran out asks this), bounded on its own.
func (x *Execution) Held(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var n int64
	if err := leaseHeld(x.store.db.WithContext(ctx).Model(&Record{}), x.rec, x.status, &x.lease).Count(&n).Error; err != nil {
		return fmt.Errorf("read idempotency record: %w", err)
	}
	if n == 1 {
		return nil
	}
	return x.store.whyNotOwned(x.store.db.WithContext(ctx), x.rec)
}

// Finish is the last phase: effect writes the intent's local effect in tx
// and returns the answer, stored in the same transaction, which supersedes
// older open intents for the subject. It runs again, whole, while it loses a
// lock conflict: effect must write only what it was given. It rolls back
// with ErrLeaseLost, ErrSuperseded, or effect's error.
func (x *Execution) Finish(ctx context.Context, effect func(tx *gorm.DB) (Response, error)) (Response, error) {
	var resp Response
	err := database.Transact(ctx, x.store.db, database.RetryOnConflict, func(tx *gorm.DB) (err error) {
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

func (x *Execution) complete(tx *gorm.DB, resp Response) error {
	now := x.now()
	set, err := x.store.completed(resp, now)
	if err != nil {
		return err
	}
	set["phase"] = phaseFinished
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

// Supersede settles, in tx, the caller's consumer's open intents of
// operation about subject, which the effect made moot.
func (x *Execution) Supersede(tx *gorm.DB, operation, subject string) error {
	return x.store.supersede(tx, x.rec.ConsumerID, operation, subject, 0, x.now())
}

// ErrSuperseded answers a request whose intent was superseded while it ran
// (409 intent_superseded); a Resume returns it (wrapped) when another
// intent made the effect.
var ErrSuperseded error = &ownerRefusal{"intent superseded by a later one"}

// ErrLeaseLost means the caller no longer owns the record: its lease ran out
// and another owner took it over (409 request_in_progress to a request).
var ErrLeaseLost error = &ownerRefusal{"idempotency lease lost"}

// ownerRefusal is an owner's phase refusing the change: the caller, which no
// longer owns the record, rolls back and neither settles nor releases it.
type ownerRefusal struct{ msg string }

func (e *ownerRefusal) Error() string { return e.msg }

func isRefusal(err error) bool {
	var r *ownerRefusal
	return errors.As(err, &r)
}
