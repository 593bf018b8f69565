package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/fault"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// secret is what a vendor's answer might carry: never in an attempt's reason.
const secret = "LK-SECRET-0001 Bearer eyJhbGciOi vendor body {\"key\":1}"

// attempts is the intent's intent.attempted events, oldest first, read back
// (each by the reconciler, with no token, consumer or request).
func attempts(t *testing.T, s *Store, id string) []Attempt {
	t.Helper()
	events, _, err := s.IntentEvents(context.Background(), id)
	if err != nil && !errors.Is(err, ErrIntentNotFound) {
		t.Fatal(err)
	}
	var out []Attempt
	for _, e := range events {
		if e.Event != audit.IntentAttempted {
			continue
		}
		if e.Actor != audit.ActorReconciler || e.ActorTokenID != nil || e.ActorConsumerID != nil || e.RequestID != nil || e.Reason == nil {
			t.Errorf("attempt event = %+v, want the reconciler's, with a reason", e)
			continue
		}
		if strings.Contains(*e.Reason, "LK-") || strings.Contains(*e.Reason, "Bearer") || strings.Contains(*e.Reason, "{") {
			t.Errorf("an attempt's reason shows a secret: %q", *e.Reason)
		}
		a, err := ParseAttempt(*e.Reason)
		if err != nil {
			t.Errorf("reason %q: %v", *e.Reason, err)
			continue
		}
		out = append(out, a)
	}
	return out
}

// reason writes an attempt in one line that ParseAttempt reads back whole;
// any other text is errNotAnAttempt.
func TestAttemptReasonRoundTrips(t *testing.T) {
	next := time.Date(2026, 12, 1, 10, 0, 30, 123456000, time.UTC)
	for want, a := range map[string]Attempt{
		"attempt 3: completed":  {Number: 3, Result: resultCompleted},
		"attempt 2: superseded": {Number: 2, Result: resultSuperseded},
		"attempt 2: waiting, next at 2026-12-01T10:00:30.123456Z":                              {Number: 2, Result: resultWaiting, Next: &next},
		"attempt 4: retry (vendor_unavailable), next at 2026-12-01T10:00:30.123456Z":           {Number: 4, Result: resultRetry, Class: "vendor_unavailable", Next: &next},
		"attempt 11: failed (vendor_uncertain), next at 2026-12-01T10:00:30.123456Z":           {Number: 11, Result: resultFailed, Class: "vendor_uncertain", Next: &next},
		"attempt 2: failed (domain_taken)":                                                     {Number: 2, Result: resultFailed, Class: "domain_taken"},
		"attempt 999999999: retry (database_unavailable), next at 2026-12-01T10:00:30.123456Z": {Number: 999999999, Result: resultRetry, Class: classDatabaseUnavailable, Next: &next},
	} {
		if got := a.reason(); got != want {
			t.Errorf("Reason = %q, want %q", got, want)
		}
		back, err := ParseAttempt(want)
		if err != nil || back.Number != a.Number || back.Result != a.Result || back.Class != a.Class ||
			(back.Next == nil) != (a.Next == nil) || (a.Next != nil && !back.Next.Equal(*a.Next)) {
			t.Errorf("ParseAttempt(%q) = %+v, %v; want %+v", want, back, err, a)
		}
	}
	for _, junk := range []string{"", "no longer wanted", "attempt 0: completed", "attempt 1: Completed", "attempt x: retry",
		"attempt 1: retry (Vendor Body)", "attempt 1: retry, next at yesterday", "attempt 1: retry, next at 2026-13-01T10:00:30.123456Z",
		"attempt 1: completed ", " attempt 1: completed", "attempt 1234567890: completed"} {
		if a, err := ParseAttempt(junk); !errors.Is(err, errNotAnAttempt) {
			t.Errorf("ParseAttempt(%q) = %+v, %v; want errNotAnAttempt", junk, a, err)
		}
	}
}

// The class of a failed attempt is the one its error names, else the one
// this package tells; a class that is not a short snake_case word (an
// error that would pass its text off as a class) is "error".
func TestErrorClass(t *testing.T) {
	unavailable := &database.UnavailableError{Err: errors.New("connection refused")}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("find vendor site: %w", fault.New("vendor_unavailable", secret)), "vendor_unavailable"},
		{fmt.Errorf("%w: stored request: %w", ErrAbandon, &fault.Fields{Fields: map[string][]string{"domain": {secret}}}), "invalid_input"},
		{fault.New(secret, secret), classError},
		{fmt.Errorf("store license: %w", unavailable), classDatabaseUnavailable},
		{fmt.Errorf("find vendor site: %w", context.DeadlineExceeded), classTimeout},
		{context.Canceled, classCanceled},
		{fmt.Errorf("%w: %w", ErrAbandon, errors.New(secret)), classCannotFinish},
		{fault.New(classPanic, "resumer panicked: "+secret), classPanic},
		{errors.New(secret), classError},
	} {
		if got := errorClass(tt.err); got != tt.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if got := errorClass(fault.New(strings.Repeat("a", 41), "")); got != classError {
		t.Errorf("a 41-letter class = %q, want %q", got, classError)
	}
}

// An intent's history: each attempt of the reconciler is in the intent's
// audit trail with its number, what came of it, the class of its error
// (never the error's text) and when it is due again.
func TestEveryReconcilerAttemptIsInTheTrail(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		rec := seed(t, r.store, "k", nil)
		clock := testkit.NewClock(rec.CreatedAt)
		script := []func(ctx context.Context, x *Execution) (Response, bool, error){
			func(context.Context, *Execution) (Response, bool, error) { return Response{}, false, nil }, // too young: waiting
			func(context.Context, *Execution) (Response, bool, error) {
				return Response{}, false, fmt.Errorf("find vendor site: %w", fault.New("vendor_unavailable", secret))
			},
			func(context.Context, *Execution) (Response, bool, error) { panic(secret) },
			func(context.Context, *Execution) (Response, bool, error) {
				return Response{}, false, errors.New(secret)
			}, // the last: failed
			func(ctx context.Context, x *Execution) (Response, bool, error) { // the slow retry finds it, kept with the domain's writes
				resp, err := x.Finish(ctx, func(*gorm.DB) (Response, error) { return done.resp, nil })
				return resp, err == nil, err
			},
		}
		pass := 0
		rc := reconcilerFor(r, clock.Now, func(ctx context.Context, x *Execution, _ *Record) (Response, bool, error) {
			pass++
			return script[pass-1](ctx, x)
		})
		rc.cfg.Settle, rc.cfg.MaxAttempts, rc.cfg.Backoff, rc.cfg.FailedInterval = time.Minute, 3, 10*time.Second, time.Hour
		var wantNext []time.Time
		for range script {
			settled, err := rc.RunOnce(context.Background())
			if err != nil || len(settled) != 1 {
				t.Fatalf("pass %d = %+v, %v\n%s", pass, settled, err, r.log.String())
			}
			now := r.find("op", "k")
			if now.LockedUntil != nil {
				wantNext = append(wantNext, *now.LockedUntil)
				clock.Set(now.LockedUntil.Add(time.Second))
			}
		}
		got := attempts(t, r.store, rec.ref())
		want := []Attempt{
			{Number: 2, Result: resultWaiting},
			{Number: 2, Result: resultRetry, Class: "vendor_unavailable"},
			{Number: 3, Result: resultRetry, Class: classPanic},
			{Number: 4, Result: resultFailed, Class: classError},
			{Number: 5, Result: resultCompleted},
		}
		if len(got) != len(want) {
			t.Fatalf("attempts = %+v, want %+v", got, want)
		}
		for i, a := range got {
			w := want[i]
			if a.Number != w.Number || a.Result != w.Result || a.Class != w.Class {
				t.Errorf("attempt %d = %+v, want %+v", i, a, w)
			}
			if i < len(wantNext) && (a.Next == nil || !a.Next.Equal(wantNext[i])) {
				t.Errorf("attempt %d is next at %v, want the record's next attempt %v", i, a.Next, wantNext[i])
			}
		}
		if got[0].Next == nil || !got[0].Next.Equal(rec.CreatedAt.Add(time.Minute)) {
			t.Errorf("the waiting attempt is next at %v, want once settled, %v", got[0].Next, rec.CreatedAt.Add(time.Minute))
		}
		if got[4].Next != nil {
			t.Errorf("the completion is next at %v, want none", got[4].Next)
		}
		if end := r.find("op", "k"); end.Status != StatusCompleted || end.Attempts != 5 {
			t.Errorf("record = %s, %d attempts; want completed, 5", end.Status, end.Attempts)
		}
	})
}

// What the reconciler leaves when it dies between any two statements of an
// attempt's settle (the record's update, then its intent.attempted event,
// in one transaction): each is failed in turn, for every outcome, and the
// attempt's event is on record if and only if the record's change is. A
// completion the domain keeps (Call.Complete in its own transaction) rolls
// back with its event, and the reconciler then records a retry.
func TestEachAttemptCommitsWithItsChange(t *testing.T) {
	type outcome struct {
		name     string
		attempts int // the seeded record's
		resume   func(db *testdb.DB) func(ctx context.Context, x *Execution, _ *Record) (Response, bool, error)
		status   string // the record after a pass with no fault
		result   string
		class    string
	}
	returns := func(res resumed, err error) func(*testdb.DB) func(context.Context, *Execution, *Record) (Response, bool, error) {
		return func(*testdb.DB) func(context.Context, *Execution, *Record) (Response, bool, error) {
			return func(context.Context, *Execution, *Record) (Response, bool, error) { return res.resp, res.done, err }
		}
	}
	vendorDown := fault.New("vendor_unavailable", secret)
	outcomes := []outcome{
		{"completed", 1, returns(done, nil), StatusCompleted, resultCompleted, ""},
		{"completed with the domain's writes", 1, func(db *testdb.DB) func(context.Context, *Execution, *Record) (Response, bool, error) {
			return func(ctx context.Context, x *Execution, _ *Record) (Response, bool, error) {
				resp, err := x.Finish(ctx, func(tx *gorm.DB) (Response, error) {
					// the domain's own write
					return done.resp, tx.Exec("UPDATE idempotency_keys SET subject = subject WHERE 1 = 0").Error
				})
				return resp, err == nil, err
			}
		}, StatusCompleted, resultCompleted, ""},
		{"waiting", 1, returns(resumed{}, nil), StatusPending, resultWaiting, ""},
		{"retry", 1, returns(resumed{}, vendorDown), StatusPending, resultRetry, "vendor_unavailable"},
		{"failed, retried slowly", 5, returns(resumed{}, vendorDown), StatusFailed, resultFailed, "vendor_unavailable"},
		{"failed for good", 1, returns(resumed{}, fmt.Errorf("%w: %w", ErrAbandon, fault.New("domain_taken", secret))), StatusFailed, resultFailed, "domain_taken"},
		{"superseded", 1, returns(resumed{}, fmt.Errorf("made by another: %w", ErrSuperseded)), statusSuperseded, resultSuperseded, ""},
	}
	notTheClaim := func(tx *gorm.DB) bool {
		set, ok := tx.Statement.Dest.(map[string]any)
		return ok && set["status"] != StatusPending
	}
	for _, o := range outcomes {
		t.Run(o.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				r := newRig(t, db)
				update := testdb.Inject(t, db.Gorm, "update", keysTable, notTheClaim, errInjected)
				event := testdb.Inject(t, db.Gorm, "create", auditTable, nil, errInjected)
				for i, fault := range []*testdb.Fault{nil, update, event} {
					key := fmt.Sprintf("k%d", i)
					rec := seed(t, r.store, key, func(rec *Record) { rec.Attempts = o.attempts })
					clock := testkit.NewClock(rec.CreatedAt.Add(time.Second))
					rc := reconcilerFor(r, clock.Now, o.resume(db))
					rc.cfg.Settle = time.Hour
					lease := dbtime.Stamp(clock.Now()).Add(rc.cfg.Lease)
					if fault != nil {
						fault.Arm(1)
					}
					if _, err := rc.RunOnce(context.Background()); err != nil {
						t.Fatal(err)
					}
					if fault != nil && fault.Hits() != 1 {
						t.Fatalf("fault %d never fired", i)
					}
					after := r.find("op", key)
					got := attempts(t, r.store, rec.ref())
					kept := o.name == "completed with the domain's writes"
					switch {
					case fault == nil:
						if after.Status != o.status || len(got) != 1 || got[0].Result != o.result || got[0].Class != o.class {
							t.Fatalf("no fault: record %s, attempts %+v; want %s with one %s (%s)", after.Status, got, o.status, o.result, o.class)
						}
					case kept: // the domain's transaction rolled back whole; the retry that followed is on record
						if after.Status != StatusPending || len(got) != 1 || got[0].Result != resultRetry || got[0].Class != classError ||
							!got[0].Next.Equal(*after.LockedUntil) {
							t.Fatalf("fault %d: record %s until %v, attempts %+v; want pending, one retry due then", i, after.Status, after.LockedUntil, got)
						}
					default: // nothing of the settle committed: still claimed, no attempt
						if after.Status != StatusPending || !after.LockedUntil.Equal(lease) || after.Attempts != o.attempts || len(got) != 0 {
							t.Fatalf("fault %d: record %s until %v (%d attempts), attempts %+v; want it as claimed until %v and no attempt",
								i, after.Status, after.LockedUntil, after.Attempts, got, lease)
						}
						r.wantLogged("settle pending record", "injected failure")
					}
					if len(got) == 1 {
						counted := o.attempts + 1
						if got[0].Result == resultWaiting {
							counted = o.attempts
						}
						if got[0].Number != o.attempts+1 || after.Attempts != counted {
							t.Errorf("attempt number %d, record at %d attempts; want %d and %d", got[0].Number, after.Attempts, o.attempts+1, counted)
						}
						if (after.LockedUntil == nil) != (got[0].Next == nil) || (got[0].Next != nil && !got[0].Next.Equal(*after.LockedUntil)) {
							t.Errorf("attempt next at %v, record's next attempt %v", got[0].Next, after.LockedUntil)
						}
					}
					update.Disarm()
					event.Disarm()
				}
			})
		})
	}
}

// An attempt whose claim was lost (another reconciler took the record over
// once the lease ran out) changes nothing and records nothing: the
// attempt that owns the record writes its own.
func TestAttemptThatLostItsClaimIsNotRecorded(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		rec := seed(t, r.store, "k", nil)
		stolen := dbtime.Now().Add(3 * time.Hour)
		for _, res := range []struct {
			res resumed
			err error
		}{{done, nil}, {resumed{}, fault.New("vendor_unavailable", secret)}, {resumed{}, ErrSuperseded}} {
			r.tamper("k", map[string]any{"locked_until": nil})
			rc := reconcilerFor(r, nil, func(context.Context, *Execution, *Record) (Response, bool, error) {
				r.tamper("k", map[string]any{"locked_until": stolen})
				return res.res.resp, res.res.done, res.err
			})
			if _, err := rc.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := attempts(t, r.store, rec.ref()); len(got) != 0 {
				t.Errorf("%v: attempts %+v, want none", res.err, got)
			}
		}
	})
}

// A pass that tries nothing is no attempt: a record whose request no key of
// this replica opens, or of an operation nobody resumes, is postponed with
// no event.
func TestPassThatTriesNothingIsNoAttempt(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		holder := newRig(t, db)
		sealed := seed(t, holder.store, "sealed", func(r *Record) { r.RequestBody = []byte(`{"event":"sealed"}`) })
		orphan := seed(t, holder.store, "orphan", func(r *Record) { r.Operation = "gone.op" })
		stranger := newRigWith(t, db, cipherOf(t, 9))
		rc := reconcilerFor(stranger, nil, func(context.Context, *Execution, *Record) (Response, bool, error) { return done.resp, done.done, nil })
		if _, err := rc.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, rec := range []*Record{sealed, orphan} {
			if got := attempts(t, stranger.store, rec.ref()); len(got) != 0 {
				t.Errorf("%s: attempts %+v, want none", rec.Key, got)
			}
			if after := holder.find(rec.Operation, rec.Key); after.Status != StatusPending || after.LockedUntil == nil {
				t.Errorf("%s = %+v, want it pending, postponed", rec.Key, after)
			}
		}
	})
}
