package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The reconciler's, the pruner's and the store's maintenance failure
// branches, on testdb's faults.

// reconcilerFor is a Reconciler on r's store resuming the operation "op"
// with resume, on clock.
func reconcilerFor(r *rig, clock func() time.Time, resume func(ctx context.Context, x *Execution, rec *Record) (Response, bool, error)) *Reconciler {
	r.t.Helper()
	op := testOperation("op", text(http.StatusCreated, "made"))
	op.Resume = func(ctx context.Context, x *Execution, rec *Record, _ bool) (Response, bool, error) {
		return resume(ctx, x, rec)
	}
	ops, err := NewOperations(op)
	if err != nil {
		r.t.Fatal(err)
	}
	return NewReconciler(ReconcilerConfig{Store: r.store, Operations: ops, MaxAttempts: 5, Lease: time.Minute,
		Backoff: time.Second, TTL: time.Hour, Log: r.logger(), Now: clock})
}

// done is a resumption that found the effect, its answer to be stored.
// resumed is what a Resume returns.
type resumed struct {
	resp Response
	done bool
}

var done = resumed{resp: Response{Status: http.StatusCreated, Body: []byte("made")}, done: true}

// A reconciler whose lease is lost while it works (another claimed the
// record after it ran out) writes nothing over the new owner's: storing the
// answer, postponing and failing are logged and the record is not reported
// settled; a superseded record is settled all the same. A database failure
// of the settle is logged the same way.
func TestReconcilerLosingItsLease(t *testing.T) {
	stolen := dbtime.Now().Add(3 * time.Hour)
	for _, tt := range []struct {
		name   string
		res    resumed
		err    error
		fail   bool   // the settle's write fails (the lease is kept)
		result string // "" for not settled
		logged []string
	}{
		{name: "the answer is found", res: done, logged: []string{"settle pending record", "idempotency lease lost"}},
		{name: "nothing found yet", logged: []string{"settle pending record", "idempotency lease lost"}},
		{name: "cannot be finished", err: fmt.Errorf("bad input: %w", ErrAbandon),
			logged: []string{"intent cannot be finished", "settle pending record", "idempotency lease lost"}},
		{name: "superseded", err: fmt.Errorf("made by another: %w", ErrSuperseded), result: resultSuperseded},
		{name: "superseded, the write fails", err: ErrSuperseded, fail: true,
			logged: []string{"settle pending record", "settle pending record: injected failure"}},
		{name: "the answer is found, the write fails", res: done, fail: true,
			logged: []string{"settle pending record", "settle pending record: injected failure"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				r := newRig(t, db)
				seed(t, r.store, "k", nil)
				var settleFault *testdb.Fault
				if tt.fail {
					settleFault = testdb.Inject(t, db.Gorm, "update", keysTable, nil, errInjected) // armed once claimed
				}
				rc := reconcilerFor(r, nil, func(context.Context, *Execution, *Record) (Response, bool, error) {
					if tt.fail {
						settleFault.Arm(1)
					} else {
						r.tamper("k", map[string]any{"locked_until": stolen})
					}
					return tt.res.resp, tt.res.done, tt.err
				})
				settled, err := rc.RunOnce(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tt.result == "" && len(settled) != 0:
					t.Errorf("settled %+v, want nothing reported", settled)
				case tt.result != "" && (len(settled) != 1 || settled[0].Result != tt.result):
					t.Errorf("settled %+v, want one %s", settled, tt.result)
				}
				r.wantLogged(tt.logged...)
				rec := r.find("op", "k")
				if rec == nil || rec.Status != StatusPending || rec.Attempts != 1 {
					t.Fatalf("record = %+v, want it pending, its attempts untouched", rec)
				}
				if !tt.fail && !rec.LockedUntil.Equal(stolen) {
					t.Errorf("lease = %v, want the new owner's %v", rec.LockedUntil, stolen)
				}
			})
		})
	}
}

// An answer the reconciler found but cannot seal is not stored: the
// failure is logged, nothing is reported settled, and the record stays
// pending under the claim, for the next pass once the lease ends.
func TestReconcilerCannotSealTheAnswer(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRigWith(t, db, sealFails{testCipher(t), 0, new(atomic.Int32)}) // the seeded record has no request to seal
		seed(t, r.store, "k", nil)
		rc := reconcilerFor(r, nil, func(context.Context, *Execution, *Record) (Response, bool, error) { return done.resp, done.done, nil })
		if settled, err := rc.RunOnce(context.Background()); err != nil || len(settled) != 0 {
			t.Fatalf("RunOnce = %+v, %v; want nothing settled", settled, err)
		}
		r.wantLogged("settle pending record", "encrypt the response body")
		if rec := r.find("op", "k"); rec == nil || rec.Status != StatusPending || rec.Attempts != 1 || rec.LockedUntil == nil {
			t.Errorf("record = %+v, want it pending under the claim", rec)
		}
	})
}

// Of two reconcilers that read the same due record, the one that claims it
// second loses the compare-and-set and does not resume it; a claim the
// database fails is logged and resumes nothing either.
func TestReconcilerLosesTheClaim(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		seed(t, r.store, "k", nil)
		now := dbtime.Now()
		due, err := r.store.duePending(context.Background(), now, now.Add(-time.Minute), time.Time{}, 10)
		if err != nil || len(due) != 1 {
			t.Fatalf("DuePending = %+v, %v", due, err)
		}
		stale := due[0]
		var resumed atomic.Int32
		resume := func(context.Context, *Execution, *Record) (Response, bool, error) {
			resumed.Add(1)
			return done.resp, done.done, nil
		}

		claim := testdb.Inject(t, db.Gorm, "update", keysTable, testdb.Setting("status", StatusPending), errInjected)
		claim.Arm(1)
		if settled, err := reconcilerFor(r, nil, resume).RunOnce(context.Background()); err != nil || len(settled) != 0 {
			t.Errorf("RunOnce with the claim failing = %+v, %v; want nothing settled", settled, err)
		}
		r.wantLogged("claim pending record", "injected failure")
		if resumed.Load() != 0 {
			t.Fatal("a record was resumed without its claim")
		}

		if settled, err := reconcilerFor(r, nil, resume).RunOnce(context.Background()); err != nil || len(settled) != 1 {
			t.Fatalf("the first reconciler: %+v, %v", settled, err)
		}
		if _, ok := reconcilerFor(r, nil, resume).reconcile(context.Background(), &stale); ok {
			t.Error("the second reconciler reported the record it lost")
		}
		if resumed.Load() != 1 {
			t.Errorf("resumed %d times, want once (by the winner)", resumed.Load())
		}
		if rec := r.find("op", "k"); rec == nil || rec.Status != StatusCompleted || rec.Attempts != 2 {
			t.Errorf("record = %+v, want the winner's completion", rec)
		}
	})
}

// An abandoned record (its owner went before Started) that changed since it
// was read (a retry took it over) is not abandoned under the new owner; an
// abandon the database fails is logged, and the record waits for the next
// pass.
func TestAbandonLosingItsCompareAndSet(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		long := dbtime.Now().Add(-2 * time.Minute)
		seed(t, r.store, "k", func(rec *Record) {
			rec.Status, rec.Phase, rec.LockedUntil = statusProcessing, ptr.OrNil(phaseReserved), &long
		})
		rc := reconcilerFor(r, nil, func(context.Context, *Execution, *Record) (Response, bool, error) {
			t.Error("a record that never started was resumed")
			return Response{}, false, nil
		})

		testdb.Inject(t, db.Gorm, "update", keysTable, testdb.Setting("status", statusAbandoned), errInjected).Arm(1)
		if settled, err := rc.RunOnce(context.Background()); err != nil || len(settled) != 0 {
			t.Errorf("RunOnce with the abandon failing = %+v, %v; want nothing settled", settled, err)
		}
		r.wantLogged("abandon record", "abandon idempotency record: injected failure")

		now := dbtime.Now()
		due, err := r.store.duePending(context.Background(), now, now.Add(-time.Minute), time.Time{}, 10)
		if err != nil || len(due) != 1 {
			t.Fatalf("DuePending = %+v, %v; want the record still due", due, err)
		}
		lease := now.Add(time.Minute)
		r.tamper("k", map[string]any{"locked_until": lease}) // a retry took it over
		if _, ok := rc.reconcile(context.Background(), &due[0]); ok {
			t.Error("a record taken over meanwhile was reported abandoned")
		}
		if rec := r.find("op", "k"); rec == nil || rec.Status != statusProcessing || !rec.LockedUntil.Equal(lease) {
			t.Errorf("record = %+v, want the new owner's, processing", rec)
		}
	})
}

// A pending record of an operation nobody resumes (none declared, or not
// this one) is postponed an hour, its attempts not counted, and logged; a
// postponement the database fails is logged too.
func TestPendingOperationWithNoResumerIsPostponedAnHour(t *testing.T) {
	for _, tt := range []struct {
		name      string
		ops       bool // a list without the operation, rather than none
		postponeX bool // the postponement fails
	}{
		{name: "no operations"},
		{name: "not among the operations", ops: true},
		{name: "the postponement fails", postponeX: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				r := newRig(t, db)
				seed(t, r.store, "k", func(rec *Record) { rec.Operation = "gone.op" })
				clock := testkit.NewClock(dbtime.Now())
				cfg := ReconcilerConfig{Store: r.store, Lease: time.Minute, Log: r.logger(), Now: clock.Now}
				if tt.ops {
					ops, err := NewOperations(testOperation("other.op", text(http.StatusCreated, "x")))
					if err != nil {
						t.Fatal(err)
					}
					cfg.Operations = ops
				}
				if tt.postponeX {
					testdb.Inject(t, db.Gorm, "update", keysTable, func(tx *gorm.DB) bool {
						set, ok := tx.Statement.Dest.(map[string]any)
						_, status := set["status"]
						return ok && !status // Postpone's, not the claim's
					}, errInjected).Arm(1)
				}
				settled, err := NewReconciler(cfg).RunOnce(context.Background())
				if err != nil || len(settled) != 0 {
					t.Fatalf("RunOnce = %+v, %v; want nothing settled", settled, err)
				}
				r.wantLogged("no resumer for a pending operation", "gone.op")
				want := clock.Now().Add(time.Hour)
				if tt.postponeX {
					r.wantLogged("postpone pending record", "injected failure")
					want = clock.Now().Add(time.Minute) // the claim's lease
				}
				rec := r.find("gone.op", "k")
				if rec == nil || rec.Status != StatusPending || rec.Attempts != 1 || rec.LockedUntil == nil || !rec.LockedUntil.Equal(want) {
					t.Errorf("record = %+v, want it pending until %v, attempts 1", rec, want)
				}
			})
		})
	}
}

// The reconciler's own attempt failing (the vendor down) is retried on a
// doubling backoff, each attempt counted, and once MaxAttempts are spent
// the record fails, to be tried again on the slow schedule.
func TestResumeFailuresBackOffThenFail(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		seed(t, r.store, "k", nil)
		clock := testkit.NewClock(dbtime.Now())
		var resumed atomic.Int32
		rc := reconcilerFor(r, clock.Now, func(context.Context, *Execution, *Record) (Response, bool, error) {
			resumed.Add(1)
			return Response{}, false, errors.New("vendor unavailable")
		})
		rc.cfg.MaxAttempts, rc.cfg.Backoff, rc.cfg.FailedInterval = 3, 10*time.Second, 2*time.Hour
		pass := func(want string) *Record {
			t.Helper()
			settled, err := rc.RunOnce(context.Background())
			if err != nil || len(settled) != 1 || settled[0].Result != want {
				t.Fatalf("RunOnce = %+v, %v; want one %s\n%s", settled, err, want, r.log.String())
			}
			return r.find("op", "k")
		}
		for i, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
			now := clock.Now()
			rec := pass(resultRetry)
			next := rec.LockedUntil.Sub(now)
			if rec.Status != StatusPending || rec.Attempts != i+2 || next < wait || next > wait+wait/4 {
				t.Fatalf("after attempt %d: %s, attempts %d, next in %v; want pending, %d, in %v..%v",
					i+1, rec.Status, rec.Attempts, next, i+2, wait, wait+wait/4)
			}
			if settled, err := rc.RunOnce(context.Background()); err != nil || len(settled) != 0 {
				t.Fatalf("a pass before the backoff ended = %+v, %v; want nothing", settled, err)
			}
			clock.Set(rec.LockedUntil.Add(time.Second)) // due
		}
		now := clock.Now().Truncate(time.Microsecond) // the reconciler's reading
		rec := pass(resultFailed)
		if rec.Status != StatusFailed || rec.Attempts != 4 || !rec.LockedUntil.Equal(now.Add(2*time.Hour)) {
			t.Errorf("after the last attempt: %s, attempts %d, next %v; want failed, 4, at %v", rec.Status, rec.Attempts, rec.LockedUntil, now.Add(2*time.Hour))
		}
		r.wantLogged("pending intent failed: an operator should look")
		if resumed.Load() != 3 {
			t.Errorf("resumed %d times, want 3", resumed.Load())
		}
	})
}

// A pending intent whose stored request is sealed under a key this replica
// does not hold is never resumed here and never fails of it, however many
// passes meet it: no attempt is counted, and it waits, pending, for a
// replica that holds the key, which then finishes it.
func TestSealedUnderAnotherKeyIsNotAnAttempt(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		holder := newRig(t, db)
		seed(t, holder.store, "k", func(r *Record) { r.RequestBody = []byte(`{"event":"sealed"}`) })
		stranger := newRigWith(t, db, cipherOf(t, 9))
		clock := testkit.NewClock(dbtime.Now())
		var resumed atomic.Int32
		resume := func(_ context.Context, _ *Execution, rec *Record) (Response, bool, error) {
			resumed.Add(1)
			if string(rec.RequestBody) != `{"event":"sealed"}` {
				return Response{}, false, fmt.Errorf("resumed with request %q", rec.RequestBody)
			}
			return done.resp, done.done, nil
		}
		rc := reconcilerFor(stranger, clock.Now, resume)
		for pass := range rc.cfg.MaxAttempts + 2 {
			settled, err := rc.RunOnce(context.Background())
			if err != nil || len(settled) != 1 || settled[0].Result != resultRetry {
				t.Fatalf("pass %d = %+v, %v; want one retry\n%s", pass, settled, err, stranger.log.String())
			}
			rec := stranger.find("op", "k")
			if rec.Status != StatusPending || rec.Attempts != 1 {
				t.Fatalf("after pass %d: %s, attempts %d; want pending, 1 (no attempt counted)", pass, rec.Status, rec.Attempts)
			}
			clock.Set(rec.LockedUntil.Add(time.Second))
		}
		if resumed.Load() != 0 {
			t.Fatalf("resumed %d times without its request", resumed.Load())
		}
		settled, err := reconcilerFor(holder, clock.Now, resume).RunOnce(context.Background())
		if err != nil || len(settled) != 1 || settled[0].Result != resultCompleted {
			t.Fatalf("the key's holder = %+v, %v; want it completed\n%s", settled, err, holder.log.String())
		}
	})
}

// A pass whose context ends stops between records: what it settled is
// reported with the context's error, and the next record is left for the
// next pass, untouched.
func TestReconcilerPassStopsWhenItsContextEnds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		seed(t, r.store, "k1", nil)
		seed(t, r.store, "k2", nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var resumed atomic.Int32
		rc := reconcilerFor(r, nil, func(context.Context, *Execution, *Record) (Response, bool, error) {
			resumed.Add(1)
			cancel() // the process is stopping
			return done.resp, done.done, nil
		})
		settled, err := rc.RunOnce(ctx)
		if !errors.Is(err, context.Canceled) || len(settled) != 1 || settled[0].Result != resultCompleted {
			t.Fatalf("RunOnce = %+v, %v; want the first record completed and context.Canceled", settled, err)
		}
		if resumed.Load() != 1 {
			t.Errorf("resumed %d records, want 1", resumed.Load())
		}
		if rec := r.find("op", "k2"); rec == nil || rec.Status != StatusPending || rec.Attempts != 1 || rec.LockedUntil != nil {
			t.Errorf("the next record = %+v, want it untouched", rec)
		}
	})
}

// A pass that cannot list the due records fails with the store's error.
func TestReconcilerPassFailsWhenItCannotList(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		testdb.Inject(t, db.Gorm, "query", keysTable, nil, errInjected).Arm(1)
		rc := reconcilerFor(r, nil, func(context.Context, *Execution, *Record) (Response, bool, error) { return done.resp, done.done, nil })
		if settled, err := rc.RunOnce(context.Background()); !errors.Is(err, errInjected) ||
			!strings.Contains(err.Error(), "list due pending records") || settled != nil {
			t.Errorf("RunOnce = %+v, %v; want the listing's error", settled, err)
		}
	})
}

// A completion by the reconciler is replayed for TTL from the completion,
// but never for less than the record's own expiry: both when the resumer
// completes it in its transaction and when the reconciler stores its answer.
func TestClaimedCompletionKeepsTheRecordsOwnExpiry(t *testing.T) {
	for _, kept := range []bool{true, false} {
		t.Run(fmt.Sprintf("kept=%v", kept), func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				r := newRig(t, db)
				own := seed(t, r.store, "k", func(rec *Record) { rec.ExpiresAt = rec.CreatedAt.Add(48 * time.Hour) }).ExpiresAt
				rc := reconcilerFor(r, nil, func(ctx context.Context, x *Execution, _ *Record) (Response, bool, error) {
					if !kept {
						return done.resp, done.done, nil
					}
					resp, err := x.Finish(ctx, func(*gorm.DB) (Response, error) { return done.resp, nil })
					return resp, err == nil, err
				})
				rc.cfg.TTL = time.Minute
				if settled, err := rc.RunOnce(context.Background()); err != nil || len(settled) != 1 || settled[0].Result != resultCompleted {
					t.Fatalf("RunOnce = %+v, %v", settled, err)
				}
				rec := r.find("op", "k")
				if rec == nil || rec.Status != StatusCompleted || rec.ExpiresAt.Before(own.Add(-time.Second)) {
					t.Errorf("record = %+v, want completed, expiring at its own %v", rec, own)
				}
			})
		})
	}
}

// The defaults a zero config gets, as documented.
func TestReconcilerAndPrunerDefaults(t *testing.T) {
	rc := NewReconciler(ReconcilerConfig{}).cfg
	if rc.MaxAttempts != 10 || rc.Lease != time.Minute || rc.FailedInterval != time.Hour || rc.Backoff != 15*time.Second ||
		rc.Interval != 15*time.Second || rc.Log == nil || rc.Now == nil || rc.Observe == nil {
		t.Errorf("reconciler defaults = %+v", rc)
	}
	p := NewPruner(PrunerConfig{}).cfg
	if p.Interval != time.Hour || p.Log == nil || p.Now == nil || p.Observe == nil {
		t.Errorf("pruner defaults = %+v", p)
	}
	p.Observe(1) // the default is told and ignores it
}

// The loops of the serve process log a failed pass and keep going, pass
// after pass, until their context ends.
func TestRunLoopsLogFailedPassesUntilStopped(t *testing.T) {
	db := testdb.New(t, "sqlite")
	r := newRig(t, db)
	testdb.Inject(t, db.Gorm, "query", keysTable, nil, errInjected).Arm(testdb.Always)
	for name, run := range map[string]func(ctx context.Context){
		"reconcile pass": NewReconciler(ReconcilerConfig{Store: r.store, Interval: time.Millisecond, Log: r.logger()}).Run,
		"msg=prune":      NewPruner(PrunerConfig{Store: r.store, Interval: time.Millisecond, Log: r.logger()}).Run,
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() { defer close(stopped); run(ctx) }()
			testkit.Eventually(t, 10*time.Second, func() bool { return strings.Count(r.log.String(), name) >= 2 },
				"two failed passes logged as %q", name)
			cancel()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("the loop did not stop with its context")
			}
		})
	}
}

// The backlog counts the pending and the failed intents, and names when
// the oldest pending one was created; with none, zero and no time.
func TestBacklog(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		if pending, oldest, failed, err := s.Backlog(ctx); err != nil || pending != 0 || !oldest.IsZero() || failed != 0 {
			t.Fatalf("empty: %d pending (oldest %v), %d failed, %v; want nothing", pending, oldest, failed, err)
		}
		old := dbtime.Now().Add(-time.Hour)
		seed(t, s, "p1", nil)
		seed(t, s, "p2", func(r *Record) { r.CreatedAt = old })
		seed(t, s, "f1", func(r *Record) { r.Status = StatusFailed })
		seed(t, s, "c1", func(r *Record) { r.Status = StatusCompleted })
		pending, oldest, failed, err := s.Backlog(ctx)
		if err != nil || pending != 2 || !oldest.Equal(old) || failed != 1 {
			t.Errorf("%d pending (oldest %v), %d failed, %v; want 2 (oldest %v), 1", pending, oldest, failed, err, old)
		}
	})
}

// The store's reads and maintenance statements fail with an error that
// says what failed, and change nothing.
func TestStoreStatementFailures(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		past := dbtime.Now().Add(-time.Hour)
		seed(t, s, "expired", func(r *Record) { r.Status, r.ExpiresAt = StatusCompleted, past })
		failed := seed(t, s, "failed", func(r *Record) { r.Status = StatusFailed })
		query := testdb.Inject(t, db.Gorm, "query", keysTable, nil, errInjected)
		update := testdb.Inject(t, db.Gorm, "update", keysTable, nil, errInjected)
		del := testdb.Inject(t, db.Gorm, "delete", keysTable, nil, errInjected)
		row := testdb.Inject(t, db.Gorm, "row", keysTable, nil, errInjected) // a grouped count's Scan
		for _, tt := range []struct {
			says string
			arm  func()
			call func() error
		}{
			{"count pending and failed intents", func() { row.Arm(1) }, func() error { _, _, _, err := s.Backlog(ctx); return err }},
			{"oldest pending record", func() { query.Arm(1) }, func() error { _, _, _, err := s.Backlog(ctx); return err }},
			{"list expired records", func() { query.Arm(1) }, func() error { _, err := s.prune(ctx, dbtime.Now(), 10); return err }},
			{"delete expired records", func() { del.Arm(1) }, func() error { _, err := s.prune(ctx, dbtime.Now(), 10); return err }},
			{"count intents", func() { query.Arm(1) }, func() error { _, _, err := s.Intents(ctx, IntentFilter{}); return err }},
			{"list intents", func() { query.ArmAfter(1, 1) }, func() error { _, _, err := s.Intents(ctx, IntentFilter{}); return err }},
			{"find intent", func() { query.Arm(1) }, func() error { _, err := s.Intent(ctx, "", failed.ref()); return err }},
			{"retry intent", func() { update.Arm(1) }, func() error { _, err := s.RetryFailed(ctx, audit.Console(), failed.ref(), dbtime.Now()); return err }},
		} {
			tt.arm()
			if err := tt.call(); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("%s: err = %v, want the injected failure, said so", tt.says, err)
			}
			query.Disarm()
			update.Disarm()
			del.Disarm()
			row.Disarm()
		}
		if rec, _ := s.find(ctx, scope{"c1", "op", "expired"}); rec == nil {
			t.Error("a failed prune deleted the expired record")
		}
		if rec, _ := s.find(ctx, scope{"c1", "op", "failed"}); rec == nil || rec.Status != StatusFailed {
			t.Errorf("a failed retry changed the record: %+v", rec)
		}
		if _, err := s.RetryFailed(ctx, audit.Console(), "01NOSUCHINTENT", dbtime.Now()); !errors.Is(err, ErrIntentNotFound) {
			t.Errorf("RetryFailed of an unknown intent = %v, want ErrIntentNotFound", err)
		}
		if n, err := s.prune(ctx, dbtime.Now(), 10); n != 1 || err != nil {
			t.Errorf("Prune once the database answers = %d, %v; want the expired record", n, err)
		}
	})
}

// Intents created before a time are those the Before filter lists.
func TestIntentsBeforeFilter(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		now := dbtime.Now()
		old := seed(t, s, "old", func(r *Record) { r.CreatedAt = now.Add(-2 * time.Hour) })
		seed(t, s, "new", func(r *Record) { r.CreatedAt = now.Add(-time.Hour) })
		list, total, err := s.Intents(context.Background(), IntentFilter{Before: now.Add(-90 * time.Minute)})
		if err != nil || total != 1 || len(list) != 1 || list[0].ID != old.ref() {
			t.Errorf("Intents before = %+v (total %d), %v; want only the older", list, total, err)
		}
	})
}

// Intents of one operation, by its exact name, are those the Operation
// filter lists, with the other filters.
func TestIntentsOperationFilter(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		now := dbtime.Now()
		store := seed(t, s, "store", func(r *Record) { r.Operation, r.CreatedAt = "things.store", now.Add(-2*time.Hour) })
		seed(t, s, "store-new", func(r *Record) { r.Operation = "things.store" })
		seed(t, s, "destroy", func(r *Record) { r.Operation, r.CreatedAt = "things.destroy", now.Add(-2*time.Hour) })
		for f, want := range map[IntentFilter]int{
			{Operation: "things.store"}:                              2,
			{Operation: "things.destroy"}:                            1,
			{Operation: "things"}:                                    0,
			{Operation: "things.%"}:                                  0,
			{Operation: "things.store", Before: now.Add(-time.Hour)}: 1,
			{Operation: "things.store", Status: StatusCompleted}:     0,
			{Operation: "things.store", ConsumerID: "c2"}:            0,
			{}: 3,
		} {
			list, total, err := s.Intents(context.Background(), f)
			if err != nil || total != int64(want) || len(list) != want {
				t.Errorf("Intents(%+v) = %d (total %d), %v; want %d", f, len(list), total, err, want)
			}
			if f.Before.IsZero() || len(list) != 1 {
				continue
			}
			if list[0].ID != store.ref() || list[0].Operation != "things.store" {
				t.Errorf("Intents(%+v) = %+v, want the older store", f, list[0])
			}
		}
	})
}

// Records made before a reconciler's LeaveBefore are left out by the query
// that lists the due, not after it: however many there are, they never
// fill a pass and keep a newer record waiting.
func TestDuePendingLeavesOutWhatCameBefore(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		now := dbtime.Now()
		for i := range 3 {
			seed(t, r.store, fmt.Sprintf("old-%d", i), func(rec *Record) { rec.CreatedAt = now.Add(-time.Hour) })
		}
		seed(t, r.store, "new", nil)
		due, err := r.store.duePending(context.Background(), now, now.Add(-time.Minute), now.Add(-time.Minute), 2)
		if err != nil || len(due) != 1 || due[0].Key != "new" {
			t.Fatalf("DuePending since a minute ago, 2 at most = %+v, %v; want the new record alone", due, err)
		}
	})
}
