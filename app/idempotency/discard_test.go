package idempotency

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/fault"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/tests/testdb"
)

// auditTable is the table the audit events live in.
var auditTable = audit.Event{}.TableName()

// A failed or abandoned intent is discarded, with its event, by whoever
// the caller names; any other status is ErrNotDiscardable and stays as it
// was; an unknown id, a bad reason or an actor the server does not know
// changes nothing.
func TestDiscard(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		now := dbtime.Now()
		due := now.Add(time.Hour)
		failed := seed(t, s, "failed", func(r *Record) { r.Status, r.LockedUntil = StatusFailed, &due })
		abandoned := seed(t, s, "abandoned", func(r *Record) { r.Status, r.Phase = statusAbandoned, ptr.OrNil(phaseReserved) })
		by := audit.ByToken("ops-consumer", "ops-token", "req-1")

		in, err := s.discard(ctx, by, failed.ref(), "  no longer wanted ", now, Discardable, nil)
		if err != nil || in.Status != StatusDiscarded || in.NextAttemptAt != nil {
			t.Fatalf("Discard(failed) = %+v, %v; want discarded, no next attempt", in, err)
		}
		rec, _ := s.find(ctx, failed.scope())
		if rec.Status != StatusDiscarded || rec.LockedUntil != nil {
			t.Errorf("record = %s, lease %v; want discarded with no lease", rec.Status, rec.LockedUntil)
		}
		events, consumer, err := s.IntentEvents(ctx, failed.ref())
		if err != nil || consumer != "c1" || len(events) != 1 {
			t.Fatalf("IntentEvents = %+v, %q, %v", events, consumer, err)
		}
		e := events[0]
		if e.Event != audit.IntentDiscarded || e.SubjectType != audit.SubjectIntent || e.SubjectID != failed.ref() || e.Actor != audit.ActorToken ||
			ptr.Deref(e.ActorTokenID) != "ops-token" || ptr.Deref(e.ActorConsumerID) != "ops-consumer" || ptr.Deref(e.RequestID) != "req-1" ||
			ptr.Deref(e.Reason) != "no longer wanted" || !e.CreatedAt.Equal(now) {
			t.Errorf("event = %+v", e)
		}
		if in, err := s.discard(ctx, audit.Console(), abandoned.ref(), "stale", now, Discardable, nil); err != nil || in.Status != StatusDiscarded {
			t.Errorf("Discard(abandoned) = %+v, %v", in, err)
		}

		for _, status := range []string{StatusPending, statusProcessing, StatusCompleted, statusSuperseded, StatusDiscarded} {
			r := seed(t, s, "in-"+status, func(r *Record) { r.Status = status })
			in, err := s.discard(ctx, by, r.ref(), "why", now, Discardable, nil)
			if !errors.Is(err, ErrNotDiscardable) || in.Status != status {
				t.Errorf("Discard(%s) = %s, %v; want ErrNotDiscardable and the intent as it is", status, in.Status, err)
			}
			if events, _, _ := s.IntentEvents(ctx, r.ref()); len(events) != 0 {
				t.Errorf("a refused discard of a %s intent left %+v", status, events)
			}
		}
		if _, err := s.discard(ctx, by, "01NOSUCHINTENT", "why", now, Discardable, nil); !errors.Is(err, ErrIntentNotFound) {
			t.Errorf("Discard(unknown) = %v, want ErrIntentNotFound", err)
		}

		other := seed(t, s, "other", func(r *Record) { r.Status = StatusFailed })
		var invalid *fault.Fields
		if _, err := s.discard(ctx, by, other.ref(), " ", now, Discardable, nil); !errors.As(err, &invalid) {
			t.Errorf("Discard without a reason = %v, want a validation error", err)
		}
		for _, nobody := range []audit.Actor{{}, {Kind: audit.ActorToken}, {Kind: audit.ActorConsole, TokenID: "t"}, {Kind: "request", TokenID: "t"}} {
			if _, err := s.discard(ctx, nobody, other.ref(), "why", now, Discardable, nil); !errors.Is(err, audit.ErrNoActor) {
				t.Errorf("Discard by %+v = %v, want ErrNoActor", nobody, err)
			}
			if _, err := s.RetryFailed(ctx, nobody, other.ref(), now); !errors.Is(err, audit.ErrNoActor) {
				t.Errorf("RetryFailed by %+v = %v, want ErrNoActor", nobody, err)
			}
		}
		if rec, _ := s.find(ctx, other.scope()); rec.Status != StatusFailed {
			t.Errorf("refused changes left the intent %s", rec.Status)
		}
	})
}

// A change and its audit event are one transaction: when the event cannot
// be written the status does not change; a failing update or read says
// what failed.
func TestOperatorChangeFailures(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		failed := seed(t, s, "failed", func(r *Record) { r.Status = StatusFailed })
		insert := testdb.Inject(t, db.Gorm, "create", auditTable, nil, errInjected)
		update := testdb.Inject(t, db.Gorm, "update", keysTable, nil, errInjected)
		query := testdb.Inject(t, db.Gorm, "query", keysTable, nil, errInjected)
		events := testdb.Inject(t, db.Gorm, "query", auditTable, nil, errInjected)
		for _, tt := range []struct {
			says string
			arm  func()
			call func() error
		}{
			{"record audit event intent.discarded", func() { insert.Arm(1) },
				func() error {
					_, err := s.discard(ctx, audit.Console(), failed.ref(), "why", dbtime.Now(), Discardable, nil)
					return err
				}},
			{"record audit event intent.retried", func() { insert.Arm(1) },
				func() error { _, err := s.RetryFailed(ctx, audit.Console(), failed.ref(), dbtime.Now()); return err }},
			{"discard intent", func() { update.Arm(1) },
				func() error {
					_, err := s.discard(ctx, audit.Console(), failed.ref(), "why", dbtime.Now(), Discardable, nil)
					return err
				}},
			{"find intent", func() { query.Arm(1) }, func() error { _, _, err := s.IntentEvents(ctx, failed.ref()); return err }},
			{"list audit events", func() { events.Arm(1) }, func() error { _, _, err := s.IntentEvents(ctx, failed.ref()); return err }},
		} {
			tt.arm()
			if err := tt.call(); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s: err = %v, want the injected failure, said so", tt.says, err)
			}
			for _, f := range []*testdb.Fault{insert, update, query, events} {
				f.Disarm()
			}
			if rec, _ := s.find(ctx, failed.scope()); rec.Status != StatusFailed {
				t.Fatalf("%s: the intent is %s, want failed still", tt.says, rec.Status)
			}
		}
		if got, _, _ := s.IntentEvents(ctx, failed.ref()); len(got) != 0 {
			t.Errorf("failed changes left events: %+v", got)
		}
	})
}

// An intent's trail outlives it: once its record is gone (pruned) its
// events are still listed, with no consumer; an id with neither is
// ErrIntentNotFound.
func TestIntentEventsOutliveTheIntent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		past := dbtime.Now().Add(-2 * time.Hour)
		r := seed(t, s, "gone", func(r *Record) { r.Status, r.ExpiresAt = statusAbandoned, past })
		if _, err := s.discard(ctx, audit.Console(), r.ref(), "why", dbtime.Now(), Discardable, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := s.prune(ctx, dbtime.Now(), 10); n != 1 || err != nil {
			t.Fatalf("Prune = %d, %v; want the expired discarded intent", n, err)
		}
		events, consumer, err := s.IntentEvents(ctx, r.ref())
		if err != nil || consumer != "" || len(events) != 1 || events[0].Event != audit.IntentDiscarded {
			t.Errorf("IntentEvents of a pruned intent = %+v, %q, %v", events, consumer, err)
		}
		if _, _, err := s.IntentEvents(ctx, "01NOSUCHINTENT"); !errors.Is(err, ErrIntentNotFound) {
			t.Errorf("IntentEvents(unknown) = %v, want ErrIntentNotFound", err)
		}
	})
}

// An intent of a RetryOnly operation is never discarded, whatever its
// status: ErrRetryOnly (an ErrNotDiscardable otherwise, for the other
// statuses), nothing changes, no event; the operations list names it.
func TestDiscardRefusesRetryOnlyOperations(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		now := dbtime.Now()
		revoke := testOperation("things.destroy", nil)
		revoke.RetryOnly = true
		ops, err := NewOperations(testOperation("op", nil), revoke)
		if err != nil {
			t.Fatal(err)
		}
		if got := ops.RetryOnly(); len(got) != 1 || got[0] != "things.destroy" {
			t.Fatalf("RetryOnly = %q, want things.destroy", got)
		}
		r := seed(t, s, "revoke", func(r *Record) { r.Operation, r.Status = "things.destroy", StatusFailed })
		in, err := s.discard(ctx, audit.Console(), r.ref(), "stuck", now, Discardable, nil, ops.RetryOnly()...)
		if !errors.Is(err, ErrRetryOnly) || in.Status != StatusFailed {
			t.Errorf("Discard(a failed revoke) = %s, %v; want ErrRetryOnly and failed", in.Status, err)
		}
		if events, _, _ := s.IntentEvents(ctx, r.ref()); len(events) != 0 {
			t.Errorf("a refused discard left %+v", events)
		}
		create := seed(t, s, "create", func(r *Record) { r.Status = StatusFailed })
		if in, err := s.discard(ctx, audit.Console(), create.ref(), "gone", now, Discardable, nil, ops.RetryOnly()...); err != nil || in.Status != StatusDiscarded {
			t.Errorf("Discard(a failed create) = %s, %v; want discarded", in.Status, err)
		}
	})
}
