package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The failure branches of the layer, each hit by a store that fails on
// command: a GORM callback on the test's database fails the statements it is
// armed for, as a database that is down, or a statement that lost a race,
// would.

// keysTable is the table the records live in.
var keysTable = Record{}.TableName()

// errInjected is a failure of the database that is not "unavailable": a bug,
// as the layer sees it.
var errInjected = errors.New("injected failure")

// rig is a guard on a test database whose log and decisions the test reads.
type rig struct {
	t        *testing.T
	db       *testdb.DB
	store    *Store
	g        *Guard
	log      *testkit.Buffer
	mu       sync.Mutex
	outcomes []string
}

func newRig(t *testing.T, db *testdb.DB, ops ...AnyOperation) *rig {
	t.Helper()
	return newRigWith(t, db, testCipher(t), ops...)
}

func newRigWith(t *testing.T, db *testdb.DB, c Cipher, ops ...AnyOperation) *rig {
	t.Helper()
	r := &rig{t: t, db: db, store: NewStore(db.Gorm, c, nil, nil), log: &testkit.Buffer{}}
	r.g = newTestGuard(t, Config{Store: r.store, TTL: time.Hour, LockTimeout: time.Minute, Log: r.logger(),
		Observe: func(_, outcome string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.outcomes = append(r.outcomes, outcome)
		}}, ops...)
	return r
}

func (r *rig) logger() *slog.Logger { return slog.New(slog.NewTextHandler(r.log, nil)) }

// outcome is the last decision the guard noted.
func (r *rig) outcome() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.outcomes) == 0 {
		return ""
	}
	return r.outcomes[len(r.outcomes)-1]
}

// wantLogged fails the test unless the log holds each of parts.
func (r *rig) wantLogged(parts ...string) {
	r.t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.log.String(), p) {
			r.t.Errorf("the log does not say %q:\n%s", p, r.log.String())
		}
	}
}

// find is the record of consumer c1's key for operation op, nil for none.
func (r *rig) find(op, key string) *Record {
	r.t.Helper()
	rec, err := r.store.find(context.Background(), scope{ConsumerID: "c1", Operation: op, Key: key})
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}

// tamper changes the stored record of key, as another owner would.
func (r *rig) tamper(key string, set map[string]any) {
	r.t.Helper()
	if err := r.db.Gorm.Model(&Record{}).Where("idempotency_key = ?", key).Updates(set).Error; err != nil {
		r.t.Fatal(err)
	}
}

// doOp is the operation Do calls run under in these tests.
const doOp = "things.do"

// do runs fn through Guard.Do for key, with the intent {"n":1}.
func (r *rig) do(key string, fn func(ctx context.Context) (Response, error)) (Response, bool, error) {
	return r.g.Do(context.Background(), scope{ConsumerID: "c1", Operation: doOp, Key: key}, []byte(theIntent), fn)
}

// made is Do work that had its effect.
func made(context.Context) (Response, error) {
	return Response{Status: http.StatusCreated, Body: []byte("made")}, nil
}

// seed inserts a record of consumer c1 for key, changed by mut first.
func seed(t *testing.T, s *Store, key string, mut func(*Record)) *Record {
	t.Helper()
	now := dbtime.Now()
	rec := &Record{ConsumerID: "c1", Operation: "op", Key: key, RequestHash: "h", Status: StatusPending,
		Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if mut != nil {
		mut(rec)
	}
	if _, ok, err := s.reserve(context.Background(), rec); !ok {
		t.Fatalf("seed %s: %v", key, err)
	}
	return rec
}

// sealFails is a Cipher whose key store breaks after it sealed allow
// values: newSealFails lets the stored request through and fails the
// response.
type sealFails struct {
	*crypt.Cipher
	allow  int32
	sealed *atomic.Int32
}

func newSealFails(t *testing.T) sealFails { return sealFails{testCipher(t), 1, new(atomic.Int32)} }

func (c sealFails) Encrypt(b []byte) (string, error) {
	if c.sealed.Add(1) <= c.allow {
		return c.Cipher.Encrypt(b)
	}
	return "", errors.New("injected: cannot seal")
}

// A duplicate whose record is gone by the time it is read (released or
// pruned between the INSERT and the read) is a race, not an error: the
// reservation is made again, and the work runs once.
func TestReserveRetriesADuplicateWhoseRecordVanished(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		dup := testdb.Inject(t, db.Gorm, "create", keysTable, nil, gorm.ErrDuplicatedKey)
		dup.Arm(1)
		var runs atomic.Int32
		res, replayed, err := r.do("k", func(ctx context.Context) (Response, error) { runs.Add(1); return made(ctx) })
		if err != nil || replayed || res.Status != http.StatusCreated || string(res.Body) != "made" {
			t.Fatalf("Do = %+v, %v, %v; want the work run", res, replayed, err)
		}
		if runs.Load() != 1 || dup.Hits() != 1 {
			t.Errorf("work ran %d times after %d vanished duplicates, want once after 1", runs.Load(), dup.Hits())
		}
		if rec := r.find(doOp, "k"); rec == nil || rec.Status != StatusCompleted {
			t.Errorf("record = %+v, want completed", rec)
		}
	})
}

// A reservation that loses its race three times running (the duplicate's
// record vanishing each time, or a lock conflict outlasting its retries)
// answers 409 in progress: the work never runs and nothing is kept.
func TestThreeLostReservationRacesAreInProgress(t *testing.T) {
	for _, tt := range []struct {
		name     string
		err      error
		attempts int64 // INSERTs per lost race
	}{
		{"the duplicate vanished", gorm.ErrDuplicatedKey, 1},
		{"a lock conflict past its retries", &mysqldriver.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}, 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				r := newRig(t, db)
				lost := testdb.Inject(t, db.Gorm, "create", keysTable, nil, tt.err)
				lost.Arm(testdb.Always)
				_, _, err := r.do("k", func(context.Context) (Response, error) {
					t.Error("the work ran without a reservation")
					return Response{}, nil
				})
				if !errors.Is(err, ErrInProgress) {
					t.Fatalf("Do = %v, want ErrInProgress", err)
				}
				if got := lost.Hits(); got != 3*tt.attempts {
					t.Errorf("%d INSERTs failed, want %d (three turns)", got, 3*tt.attempts)
				}
				if r.outcome() != "in_progress" {
					t.Errorf("noted %q, want in_progress", r.outcome())
				}
				if rec := r.find(doOp, "k"); rec != nil {
					t.Errorf("a lost reservation left a record: %+v", rec)
				}
			})
		})
	}
}

// A take-over whose write fails is not executed: an unavailable database is
// ErrNotRecorded (503, retry), any other failure is returned as it is (a
// 500), and the record the retry found is left as it was.
func TestFailedTakeOverIsNotRecorded(t *testing.T) {
	for _, tt := range []struct {
		name        string
		err         error
		notRecorded bool // answered ErrNotRecorded (503, retry)
	}{
		{"database unavailable", context.DeadlineExceeded, true},
		{"another failure", errInjected, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				r := newRig(t, db)
				if _, _, err := r.do("k", made); err != nil {
					t.Fatal(err)
				}
				r.tamper("k", map[string]any{"status": StatusFailed, "locked_until": nil})
				takeOver := testdb.Inject(t, db.Gorm, "update", keysTable, testdb.Setting("status", statusProcessing), tt.err)
				takeOver.Arm(1)
				_, _, err := r.do("k", func(context.Context) (Response, error) {
					t.Error("the work ran though the take-over failed")
					return Response{}, nil
				})
				if errors.Is(err, ErrNotRecorded) != tt.notRecorded || !errors.Is(err, tt.err) {
					t.Fatalf("Do = %v; want ErrNotRecorded %v, wrapping %v", err, tt.notRecorded, tt.err)
				}
				if !strings.Contains(err.Error(), "take over idempotency record") {
					t.Errorf("error %q does not say what failed", err)
				}
				if takeOver.Hits() != 1 {
					t.Errorf("the take-over was tried %d times, want once", takeOver.Hits())
				}
				if rec := r.find(doOp, "k"); rec == nil || rec.Status != StatusFailed || rec.Attempts != 1 {
					t.Errorf("record = %+v, want it failed as it was", rec)
				}
			})
		})
	}
}

// A settle that fails (the completion's write, the completion's sealing, the
// release's write, or a release that finds its lease lost) is logged, the
// caller still hears what the work answered, and the record stays as the
// settle found it, for a retry to take over once the lease ends.
func TestSettleFailureIsLoggedAndLeavesTheRecord(t *testing.T) {
	stolen := dbtime.Now().Add(3 * time.Hour)
	for _, tt := range []struct {
		name    string
		cipher  func(t *testing.T) Cipher
		arm     func(db *testdb.DB, t *testing.T)
		work    func(r *rig) func(context.Context) (Response, error)
		wantErr error
		logged  string
		lease   *time.Time // the record's lease after the settle; nil: the owner's own
	}{
		{name: "the completion's write fails",
			arm: func(db *testdb.DB, t *testing.T) {
				testdb.Inject(t, db.Gorm, "update", keysTable, testdb.Setting("status", StatusCompleted), errInjected).Arm(1)
			},
			work: func(*rig) func(context.Context) (Response, error) { return made }, logged: "settle idempotency record: injected failure"},
		{name: "the completion cannot be sealed",
			cipher: func(t *testing.T) Cipher { return newSealFails(t) },
			work:   func(*rig) func(context.Context) (Response, error) { return made }, logged: "encrypt the response body"},
		{name: "the release's write fails",
			arm: func(db *testdb.DB, t *testing.T) {
				testdb.Inject(t, db.Gorm, "update", keysTable, testdb.Setting("status", statusAbandoned), errInjected).Arm(1)
			},
			work: func(*rig) func(context.Context) (Response, error) {
				return func(context.Context) (Response, error) { return Response{}, errBoom }
			},
			wantErr: errBoom, logged: "settle idempotency record: injected failure"},
		{name: "the release finds its lease lost",
			work: func(r *rig) func(context.Context) (Response, error) {
				return func(context.Context) (Response, error) {
					r.tamper("k", map[string]any{"locked_until": stolen}) // taken over meanwhile
					return Response{Status: http.StatusConflict}, nil
				}
			},
			logged: "idempotency lease lost", lease: &stolen},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				c := Cipher(testCipher(t))
				if tt.cipher != nil {
					c = tt.cipher(t)
				}
				r := newRigWith(t, db, c)
				if tt.arm != nil {
					tt.arm(db, t)
				}
				res, _, err := r.do("k", tt.work(r))
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
					t.Fatalf("Do = %+v, %v; want the work's own answer (error %v)", res, err, tt.wantErr)
				}
				if tt.wantErr == nil && res.Status == http.StatusCreated && string(res.Body) != "made" {
					t.Errorf("Do = %+v, want the work's answer", res)
				}
				r.wantLogged("idempotency settle failed", tt.logged)
				rec := r.find(doOp, "k")
				if rec == nil || rec.Status != statusProcessing {
					t.Fatalf("record = %+v, want it left processing", rec)
				}
				if tt.lease != nil && !rec.LockedUntil.Equal(*tt.lease) {
					t.Errorf("lease = %v, want the new owner's %v untouched", rec.LockedUntil, *tt.lease)
				}
			})
		})
	}
}

// When the work panics and even the release fails, that is logged, the
// panic goes on, and the record stays processing until its lease ends.
func TestReleaseAfterAPanicFailingIsLogged(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		testdb.Inject(t, db.Gorm, "update", keysTable, testdb.Setting("status", statusAbandoned), errInjected).Arm(1)
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("recover() = %v, want the work's panic", p)
				}
			}()
			_, _, _ = r.do("k", func(context.Context) (Response, error) { panic("boom") })
		}()
		r.wantLogged("idempotency release failed", "injected failure")
		if r.outcome() != "released" {
			t.Errorf("noted %q, want released", r.outcome())
		}
		if rec := r.find(doOp, "k"); rec == nil || rec.Status != statusProcessing {
			t.Errorf("record = %+v, want it left processing", rec)
		}
	})
}

// stepsOp is an operation whose Run the test sets, run through its Do.
type stepsOp struct {
	run func(ctx context.Context, x *Execution) (Response, error)
}

func (s *stepsOp) op() Operation[struct{}] {
	return Operation[struct{}]{
		Name: "things.steps",
		Run:  func(ctx context.Context, x *Execution, _ struct{}) (Response, error) { return s.run(ctx, x) },
		Resume: func(context.Context, *Execution, *Record, bool) (Response, bool, error) {
			return Response{}, false, nil
		},
	}
}

// Call.Started that cannot record its recovery point stops the work before
// the vendor hears of it: a database error is ErrNotRecorded and the key is
// released (the record kept abandoned, for its fingerprint); a record superseded meanwhile is ErrSuperseded and a lost lease
// ErrLeaseLost, both left to their new owner as they are; a failed read of
// why is an error of its own.
func TestStartedFailures(t *testing.T) {
	stolen := dbtime.Now().Add(3 * time.Hour)
	for _, tt := range []struct {
		name    string
		before  func(r *rig, t *testing.T)
		want    error  // errors.Is
		says    string // in the error
		outcome string
		left    string // the record's status after; "" for none
	}{
		{name: "database unavailable",
			before: func(r *rig, t *testing.T) {
				testdb.Inject(t, r.db.Gorm, "update", keysTable, testdb.Setting("phase", phaseStarted), context.DeadlineExceeded).Arm(1)
			},
			want: ErrNotRecorded, outcome: "released", left: statusAbandoned},
		{name: "superseded meanwhile",
			before: func(r *rig, _ *testing.T) { r.tamper("k", map[string]any{"status": statusSuperseded}) },
			want:   ErrSuperseded, outcome: "superseded", left: statusSuperseded},
		{name: "lease lost",
			before: func(r *rig, _ *testing.T) { r.tamper("k", map[string]any{"locked_until": stolen}) },
			want:   ErrLeaseLost, outcome: "in_progress", left: statusProcessing},
		{name: "why cannot be read",
			before: func(r *rig, t *testing.T) {
				r.tamper("k", map[string]any{"locked_until": stolen})
				testdb.Inject(t, r.db.Gorm, "row", keysTable, nil, errInjected).Arm(1)
			},
			want: errInjected, says: "read idempotency record", outcome: "released", left: statusProcessing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				s := &stepsOp{}
				op := s.op()
				r := newRig(t, db, op)
				s.run = func(ctx context.Context, x *Execution) (Response, error) {
					tt.before(r, t)
					if err := x.Start(ctx); err != nil {
						return Response{}, err
					}
					t.Error("the work went on past a failed Started")
					return Response{Status: http.StatusCreated}, nil
				}
				_, _, err := op.Do(context.Background(), r.g, Caller{ConsumerID: "c1"}, "k", struct{}{}, nil)
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("Do = %v, want %v saying %q", err, tt.want, tt.says)
				}
				if tt.want != ErrLeaseLost && errors.Is(err, ErrLeaseLost) {
					t.Errorf("Do = %v: taken for a lost lease", err)
				}
				if r.outcome() != tt.outcome {
					t.Errorf("noted %q, want %q", r.outcome(), tt.outcome)
				}
				rec := r.find("things.steps", "k")
				switch {
				case tt.left == "" && rec != nil:
					t.Errorf("record = %+v, want it released", rec)
				case tt.left != "" && (rec == nil || rec.Status != tt.left):
					t.Errorf("record = %+v, want it left %s", rec, tt.left)
				}
			})
		})
	}
}

// subjectOp is an operation about a subject (its body), whose work writes a
// consumers row (its local effect) and completes the record in the same
// transaction; before runs first, as whatever happens meanwhile.
func subjectOp(db *testdb.DB, before func(ctx context.Context)) Operation[string] {
	return Operation[string]{
		Name:    "things.create",
		Subject: func(in string) string { return in },
		Run: func(ctx context.Context, x *Execution, in string) (Response, error) {
			before(ctx)
			now := dbtime.Now()
			return x.Finish(ctx, func(tx *gorm.DB) (Response, error) {
				err := tx.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)", in, in, now, now).Error
				return Response{Status: http.StatusCreated, Body: []byte("made " + in)}, err
			})
		},
		Resume: func(context.Context, *Execution, *Record, bool) (Response, bool, error) {
			return Response{}, false, nil
		},
	}
}

// serve posts body with key to op's route on g and returns the recorder and
// the error the route answered with.
func serve(g *Guard, op Operation[string], key, body string) (*httptest.ResponseRecorder, error) {
	e := echo.New()
	var got error
	e.HTTPErrorHandler = func(err error, c echo.Context) { got = err; _ = c.NoContent(http.StatusInternalServerError) }
	e.POST("/things", op.Handler(g, headerCall, func(body []byte) (string, []byte, error) { return string(body), nil, nil }))
	req := httptest.NewRequest(http.MethodPost, "/things", strings.NewReader(body))
	if key != "" {
		req.Header.Set(HeaderKey, key)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec, got
}

// Call.Complete that fails inside the work's transaction rolls the work's
// local writes back with it: a lost lease (ErrLeaseLost) and a superseded
// intent (ErrSuperseded) are refusals the guard leaves alone; a body that
// cannot be sealed, and older intents that cannot be found or superseded,
// are errors, and the key is released (the record kept abandoned, for its
// fingerprint).
func TestCompleteFailuresRollTheWorkBack(t *testing.T) {
	stolen := dbtime.Now().Add(3 * time.Hour)
	for _, tt := range []struct {
		name    string
		cipher  func(t *testing.T) Cipher
		older   bool // an older failed intent for the subject waits
		before  func(r *rig, t *testing.T)
		want    error
		says    string
		outcome string
		left    string // the record's status after; "" for none
	}{
		{name: "lease lost",
			before: func(r *rig, _ *testing.T) { r.tamper("k", map[string]any{"locked_until": stolen}) },
			want:   ErrLeaseLost, outcome: "in_progress", left: statusProcessing},
		{name: "superseded meanwhile",
			before: func(r *rig, _ *testing.T) { r.tamper("k", map[string]any{"status": statusSuperseded}) },
			want:   ErrSuperseded, outcome: "superseded", left: statusSuperseded},
		{name: "the response cannot be sealed", cipher: func(t *testing.T) Cipher { return newSealFails(t) },
			before: func(*rig, *testing.T) {}, says: "encrypt the response body", outcome: "released", left: statusAbandoned},
		{name: "older intents cannot be found",
			before: func(r *rig, t *testing.T) { testdb.Inject(t, r.db.Gorm, "query", keysTable, nil, errInjected).Arm(1) },
			want:   errInjected, says: "find older intents", outcome: "released", left: statusAbandoned},
		{name: "older intents cannot be superseded", older: true,
			before: func(r *rig, t *testing.T) {
				testdb.Inject(t, r.db.Gorm, "update", keysTable, testdb.Setting("status", statusSuperseded), errInjected).Arm(1)
			},
			want: errInjected, says: "supersede older intents", outcome: "released", left: statusAbandoned},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *testdb.DB) {
				c := Cipher(testCipher(t))
				if tt.cipher != nil {
					c = tt.cipher(t)
				}
				var r *rig
				op := subjectOp(db, func(context.Context) { tt.before(r, t) })
				r = newRigWith(t, db, c, op)
				if tt.older {
					subject := "a.test"
					seed(t, r.store, "old", func(rec *Record) {
						rec.Operation, rec.Subject, rec.Status = op.Name, &subject, StatusFailed
					})
				}
				resp, err := serve(r.g, op, "k", "a.test")
				if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("answer %d, error %v; want %v saying %q", resp.Code, err, tt.want, tt.says)
				}
				var n int64
				if err := db.Gorm.Table("consumers").Where("id = ?", "a.test").Count(&n).Error; err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("the work's write committed though Complete failed")
				}
				if r.outcome() != tt.outcome {
					t.Errorf("noted %q, want %q", r.outcome(), tt.outcome)
				}
				rec := r.find(op.Name, "k")
				switch {
				case tt.left == "" && rec != nil:
					t.Errorf("record = %+v, want it released", rec)
				case tt.left != "" && (rec == nil || rec.Status != tt.left):
					t.Errorf("record = %+v, want it left %s", rec, tt.left)
				}
				if tt.older {
					if old := r.find(op.Name, "old"); old == nil || old.Status != StatusFailed {
						t.Errorf("older intent = %+v, want it failed still (rolled back)", old)
					}
				}
			})
		})
	}
}

// The owner's refusals are told apart, wrapped or not, so that the
// operation rolls its writes back and answers them rather than taking them
// for an unknown outcome; the store's other failures are not refusals.
func TestOwnerRefusalsAreRefusals(t *testing.T) {
	for _, err := range []error{ErrSuperseded, ErrLeaseLost, fmt.Errorf("complete: %w", ErrLeaseLost)} {
		if !isRefusal(err) {
			t.Errorf("%v is not a caller's refusal", err)
		}
	}
	for _, err := range []error{ErrNotRecorded, ErrInProgress, errInjected} {
		if isRefusal(err) {
			t.Errorf("%v is taken for a caller's refusal", err)
		}
	}
}

// A stored record whose headers cannot be read is not replayed half: the
// replay fails before anything is written. A completed intent with no
// stored headers shows no Location.
func TestUnreadableStoredHeaders(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		h := newHarness(t, db)
		h.run = text(http.StatusCreated, "made")
		if got := h.post("k", `{}`).Code; got != http.StatusCreated {
			t.Fatalf("first = %d", got)
		}
		if err := db.Gorm.Model(&Record{}).Where("idempotency_key = ?", "k").Update("response_headers", "{not json").Error; err != nil {
			t.Fatal(err)
		}
		got := h.post("k", `{}`)
		if got.Code != http.StatusInternalServerError || strings.Contains(got.Body.String(), "made") || got.Header().Get(headerReplayed) != "" {
			t.Errorf("replay of unreadable headers = %d %q replayed=%q; want a 500 and nothing of the record",
				got.Code, got.Body.String(), got.Header().Get(headerReplayed))
		}
		if h.runs.Load() != 1 {
			t.Errorf("the work ran %d times, want once", h.runs.Load())
		}

		if err := db.Gorm.Model(&Record{}).Where("idempotency_key = ?", "k").Update("response_headers", nil).Error; err != nil {
			t.Fatal(err)
		}
		rec, _ := h.store.find(context.Background(), scope{"c1", "things.store", "k"})
		in, err := h.store.Intent(context.Background(), "c1", rec.ref())
		if err != nil || in.Result == nil || in.Result.Status != http.StatusCreated || in.Result.Location != "" {
			t.Errorf("Intent = %+v, %v; want the 201 with no Location", in, err)
		}
	})
}

// A keyless request whose two reservations (under its request id, then a
// fresh one) both lose their race is not run: the race is its answer.
func TestKeylessReservationRacedTwiceIsNotRun(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		var runs atomic.Int32
		op := Operation[string]{Name: "things.create",
			Run: func(context.Context, *Execution, string) (Response, error) {
				runs.Add(1)
				return Response{Status: http.StatusCreated}, nil
			},
			Resume: func(context.Context, *Execution, *Record, bool) (Response, bool, error) {
				return Response{}, false, nil
			}}
		r := newRig(t, db, op)
		dup := testdb.Inject(t, db.Gorm, "create", keysTable, nil, gorm.ErrDuplicatedKey)
		dup.Arm(testdb.Always)
		_, err := serve(r.g, op, "", `{}`)
		if !errors.Is(err, errRaced) || runs.Load() != 0 || dup.Hits() != 2 {
			t.Errorf("error %v, %d runs, %d reservations; want errRaced, none, 2", err, runs.Load(), dup.Hits())
		}
		r.wantLogged("record intent failed")
		var n int64
		if err := db.Gorm.Model(&Record{}).Count(&n).Error; err != nil || n != 0 {
			t.Errorf("%d records, %v; want none", n, err)
		}
	})
}

// A Guard needs a Store.
func TestGuardNeedsAStore(t *testing.T) {
	ops, _ := NewOperations()
	if g, err := New(Config{Operations: ops}); err == nil || g != nil {
		t.Errorf("New without a Store = %v, %v; want an error", g, err)
	}
}

// A request with no body at all is the intent of an empty body: its retry,
// with no body or an empty one, is replayed.
func TestNilBodyIsTheEmptyIntent(t *testing.T) {
	h := newHarness(t, testdb.New(t, "sqlite"))
	h.run = text(http.StatusCreated, "made")
	post := func(body *strings.Reader) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/things", nil)
		req.Body = nil
		if body != nil {
			req = httptest.NewRequest(http.MethodPost, "/things", body)
		}
		req.Header.Set(HeaderKey, "k")
		rec := httptest.NewRecorder()
		h.e.ServeHTTP(rec, req)
		return rec
	}
	if got := post(nil); got.Code != http.StatusCreated || got.Header().Get(headerReplayed) != "" {
		t.Fatalf("first = %d replayed=%q", got.Code, got.Header().Get(headerReplayed))
	}
	for _, body := range []*strings.Reader{nil, strings.NewReader("")} {
		if got := post(body); got.Code != http.StatusCreated || got.Header().Get(headerReplayed) != "true" {
			t.Errorf("retry = %d replayed=%q, want the replay", got.Code, got.Header().Get(headerReplayed))
		}
	}
	if h.runs.Load() != 1 {
		t.Errorf("the work ran %d times, want once", h.runs.Load())
	}
}

// A Response with no status answers 200.
func TestZeroStatusAnswers200(t *testing.T) {
	h := newHarness(t, testdb.New(t, "sqlite"))
	h.run = respondWith(Response{Body: []byte("ok")})
	if got := h.post("k", `{}`); got.Code != http.StatusOK || got.Body.String() != "ok" {
		t.Errorf("answer = %d %q, want 200 ok", got.Code, got.Body.String())
	}
}

// A write through a group commit that has closed (the process stopping) is
// never run: Reserve fails with ErrGroupClosed and nothing is kept.
func TestClosedGroupCommitRefusesTheWrite(t *testing.T) {
	db := testdb.New(t, "sqlite")
	g := database.NewGroupCommit(db.Gorm, 0)
	g.Close()
	s := NewStore(db.Gorm, testCipher(t), nil, g)
	now := dbtime.Now()
	lease := now.Add(time.Minute)
	rec := &Record{ConsumerID: "c1", Operation: "op", Key: "k", RequestHash: "h", Status: statusProcessing,
		LockedUntil: &lease, Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, ok, err := s.reserve(context.Background(), rec); ok || !errors.Is(err, database.ErrGroupClosed) {
		t.Errorf("Reserve = %v, %v; want ErrGroupClosed", ok, err)
	}
	if found, err := s.find(context.Background(), rec.scope()); found != nil || err != nil {
		t.Errorf("Find = %+v, %v; want no record", found, err)
	}
}
