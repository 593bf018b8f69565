package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// work is an execution as a scenario writes it, whatever runs it: the
// middleware (a handler answering status and body, or erring) or Do.
type work func(ctx context.Context) (status int, body string, err error)

// answer is what a call got, in the same terms for both fronts.
type answer struct {
	status   int
	body     string
	replayed bool
	err      error // for the middleware: the sentinel its error matched
}

var errBoom = errors.New("boom")

// unknownOutcome is an error that says the effect may have happened.
type unknownOutcome struct{}

func (unknownOutcome) Error() string        { return "vendor timed out" }
func (unknownOutcome) OutcomeUnknown() bool { return true }
func (unknownOutcome) ExternalRef() string  { return "site.test" }

// sentinels are the errors a middleware answer is matched against, in order.
var sentinels = []error{ErrPending, ErrNotKept, ErrInProgress, ErrKeyReused, ErrNotRecorded, ErrDiscarded, errBoom}

// front runs a call for an intent: key and body (the intent) under consumer c1.
type front struct {
	name string
	op   string
	make func(g *Guard) func(key, body string, w work) answer
}

var fronts = []front{
	{name: "middleware", op: "things.store", make: func(g *Guard) func(key, body string, w work) answer {
		e := echo.New()
		e.HTTPErrorHandler = func(err error, c echo.Context) {
			name := err.Error()
			for _, s := range sentinels {
				if errors.Is(err, s) {
					name = s.Error()
					break
				}
			}
			c.Response().Header().Set("X-Test-Error", name)
			_ = c.NoContent(http.StatusInternalServerError)
		}
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // app/http's recover, in small
			return func(c echo.Context) (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return next(c)
			}
		})
		e.POST("/things", scenarioOperation.Handler(g, headerCall))
		return func(key, body string, w work) answer {
			req := httptest.NewRequest(http.MethodPost, "/things", strings.NewReader(body))
			req = req.WithContext(context.WithValue(req.Context(), workKey{}, w))
			req.Header.Set(HeaderKey, key)
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			a := answer{status: rec.Code, body: rec.Body.String(), replayed: rec.Header().Get(headerReplayed) == "true"}
			if name := rec.Header().Get("X-Test-Error"); name != "" {
				a.err = errors.New(name)
				for _, s := range sentinels {
					if s.Error() == name {
						a.err = s
					}
				}
			}
			return a
		}
	}},
	{name: "do", op: "things.sync", make: func(g *Guard) func(key, body string, w work) answer {
		return func(key, body string, w work) (a answer) {
			defer func() {
				if r := recover(); r != nil {
					a.err = fmt.Errorf("panic: %v", r)
				}
			}()
			res, replayed, err := g.Do(context.Background(), scope{ConsumerID: "c1", Operation: "things.sync", Key: key}, []byte(body),
				func(ctx context.Context) (Response, error) {
					status, body, err := w(ctx)
					return Response{Status: status, Body: []byte(body)}, err
				})
			return answer{status: res.Status, body: string(res.Body), replayed: replayed, err: err}
		}
	}},
}

type workKey struct{}

// scenarioOperation runs, as its work, the scenario's work that the
// request's context carries (a detached context keeps its values).
var scenarioOperation = testOperation("things.store", func(ctx context.Context) (Response, error) {
	status, body, err := ctx.Value(workKey{}).(work)(ctx)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: status, Headers: map[string]string{echo.HeaderContentType: echo.MIMETextPlainCharsetUTF8}, Body: []byte(body)}, nil
})

func newGuard(t testing.TB, db *testdb.DB) (*Guard, *Store) {
	s := NewStore(db.Gorm, testCipher(t), nil, nil)
	return newTestGuard(t, Config{Store: s, TTL: time.Hour, LockTimeout: time.Minute}, scenarioOperation), s
}

// stage is what a scenario plays on: one key of one front.
type stage struct {
	t     *testing.T
	db    *testdb.DB
	store *Store
	scope scope
	call  func(body string, w work) answer
	runs  atomic.Int32
}

const theIntent = `{"n":1}`

// made is work that has its effect.
func (s *stage) made(context.Context) (int, string, error) {
	s.runs.Add(1)
	return http.StatusCreated, "made", nil
}

func (s *stage) record() *Record {
	s.t.Helper()
	r, err := s.store.find(context.Background(), s.scope)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// tamper changes the stored record, as time or a dead owner would.
func (s *stage) tamper(set map[string]any) {
	s.t.Helper()
	if err := s.db.Gorm.Model(&Record{}).Where("idempotency_key = ?", s.scope.Key).Updates(set).Error; err != nil {
		s.t.Fatal(err)
	}
}

func (s *stage) wantRuns(n int32) {
	s.t.Helper()
	if got := s.runs.Load(); got != n {
		s.t.Errorf("the work ran %d times, want %d", got, n)
	}
}

func (s *stage) wantExecuted(a answer) {
	s.t.Helper()
	if a.err != nil || a.replayed || a.status != http.StatusCreated || a.body != "made" {
		s.t.Errorf("answer = %+v, want an execution: 201 made", a)
	}
}

func (s *stage) wantReplayed(a answer) {
	s.t.Helper()
	if a.err != nil || !a.replayed || a.status != http.StatusCreated || a.body != "made" {
		s.t.Errorf("answer = %+v, want a replay of 201 made", a)
	}
}

// wantFingerprintOnly checks what a failed execution leaves: the record
// abandoned with nothing of the failure stored, bound to its request, so
// that the key with another request is refused without running.
func (s *stage) wantFingerprintOnly() {
	s.t.Helper()
	r := s.record()
	if r == nil || r.Status != statusAbandoned || r.ResponseStatus != nil || len(r.ResponseBody) != 0 {
		s.t.Fatalf("after a failure the record is %+v, want it abandoned with no response", r)
	}
	runs := s.runs.Load()
	if a := s.call(`{"n":2}`, s.made); !errors.Is(a.err, ErrKeyReused) {
		s.t.Errorf("the key with another request got %+v, want ErrKeyReused", a)
	}
	s.wantRuns(runs)
}

var scenarios = []struct {
	name string
	play func(s *stage)
}{
	{"first run executes and stores", func(s *stage) {
		s.wantExecuted(s.call(theIntent, s.made))
		s.wantRuns(1)
		if r := s.record(); r == nil || r.Status != StatusCompleted {
			s.t.Errorf("record = %+v, want completed", r)
		}
	}},
	{"sequential duplicate replays without running", func(s *stage) {
		s.wantExecuted(s.call(theIntent, s.made))
		s.wantReplayed(s.call(theIntent, s.made))
		s.wantReplayed(s.call(`{ "n" : 1 }`, s.made)) // the same intent, other bytes
		s.wantRuns(1)
	}},
	{"concurrent duplicates: one runs, the others are told", func(s *stage) {
		const n = 8
		var answered atomic.Int32
		hold := func(ctx context.Context) (int, string, error) {
			s.runs.Add(1)
			// Hold the lease until every other caller has its answer.
			testkit.Poll(10*time.Second, func() bool { return answered.Load() >= n-1 })
			return http.StatusCreated, "made", nil
		}
		answers := make([]answer, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				answers[i] = s.call(theIntent, hold)
				answered.Add(1)
			})
		}
		close(start)
		wg.Wait()
		executed := 0
		for _, a := range answers {
			switch {
			case a.err == nil && !a.replayed:
				executed++
			case errors.Is(a.err, ErrInProgress), a.err == nil && a.replayed:
			default:
				s.t.Errorf("a duplicate got %+v, want ErrInProgress or a replay", a)
			}
		}
		if executed != 1 {
			s.t.Errorf("%d callers executed, want 1", executed)
		}
		s.wantRuns(1)
		s.wantReplayed(s.call(theIntent, s.made))
		s.wantRuns(1)
	}},
	{"an error releases the key (its fingerprint kept) and the retry runs", func(s *stage) {
		a := s.call(theIntent, func(context.Context) (int, string, error) { s.runs.Add(1); return 0, "", errBoom })
		if !errors.Is(a.err, errBoom) {
			s.t.Errorf("err = %v, want errBoom", a.err)
		}
		s.wantFingerprintOnly()
		s.wantExecuted(s.call(theIntent, s.made))
		s.wantRuns(2)
	}},
	{"a non-2xx result releases the key (its fingerprint kept) and the retry runs", func(s *stage) {
		a := s.call(theIntent, func(context.Context) (int, string, error) {
			s.runs.Add(1)
			return http.StatusConflict, "taken", nil
		})
		if a.err != nil || a.replayed || a.status != http.StatusConflict || a.body != "taken" {
			s.t.Errorf("answer = %+v, want the 409 as it is", a)
		}
		s.wantFingerprintOnly()
		s.wantExecuted(s.call(theIntent, s.made))
		s.wantRuns(2)
	}},
	{"a panic releases the key (its fingerprint kept) and the retry runs", func(s *stage) {
		s.call(theIntent, func(context.Context) (int, string, error) { s.runs.Add(1); panic("boom") })
		s.wantFingerprintOnly()
		s.wantExecuted(s.call(theIntent, s.made))
		s.wantRuns(2)
	}},
	{"an unknown outcome is kept pending and never run again", func(s *stage) {
		a := s.call(theIntent, func(context.Context) (int, string, error) { s.runs.Add(1); return 0, "", unknownOutcome{} })
		if !errors.Is(a.err, ErrPending) {
			s.t.Errorf("err = %v, want ErrPending", a.err)
		}
		if r := s.record(); r == nil || r.Status != StatusPending || ptr.Deref(r.ExternalRef) != "site.test" {
			s.t.Errorf("record = %+v, want pending with the error's reference", r)
		}
		if a := s.call(theIntent, s.made); !errors.Is(a.err, ErrPending) {
			s.t.Errorf("duplicate: %+v, want ErrPending", a)
		}
		s.wantRuns(1)
	}},
	{"a live lease is in progress", func(s *stage) {
		s.wantExecuted(s.call(theIntent, s.made))
		s.tamper(map[string]any{"status": statusProcessing, "locked_until": dbtime.Now().Add(time.Minute)})
		if a := s.call(theIntent, s.made); !errors.Is(a.err, ErrInProgress) {
			s.t.Errorf("answer = %+v, want ErrInProgress", a)
		}
		s.wantRuns(1)
	}},
	{"a stale lease is taken over", func(s *stage) {
		s.wantExecuted(s.call(theIntent, s.made))
		s.tamper(map[string]any{"status": statusProcessing, "locked_until": dbtime.Now().Add(-time.Second)})
		s.wantExecuted(s.call(theIntent, s.made))
		s.wantRuns(2)
		if r := s.record(); r == nil || r.Status != StatusCompleted || r.Attempts != 2 {
			s.t.Errorf("record = %+v, want completed on its second attempt", r)
		}
	}},
	{"an expired record runs as new", func(s *stage) {
		s.wantExecuted(s.call(theIntent, s.made))
		first := s.record()
		s.tamper(map[string]any{"expires_at": dbtime.Now().Add(-time.Second)})
		s.wantExecuted(s.call(theIntent, s.made))
		s.wantRuns(2)
		if r := s.record(); r == nil || r.Status != StatusCompleted || r.Attempts != 1 || r.ref() == first.ref() {
			s.t.Errorf("record = %+v, want a new intent (attempt 1, a new id)", r)
		}
	}},
	{"another intent under the key is refused", func(s *stage) {
		s.wantExecuted(s.call(theIntent, s.made))
		if a := s.call(`{"n":2}`, s.made); !errors.Is(a.err, ErrKeyReused) {
			s.t.Errorf("answer = %+v, want ErrKeyReused", a)
		}
		s.wantRuns(1)
	}},
	{"a discarded intent is refused until it expires, then forgotten", func(s *stage) {
		failed := func(context.Context) (int, string, error) { s.runs.Add(1); return 0, "", unknownOutcome{} }
		if a := s.call(theIntent, failed); !errors.Is(a.err, ErrPending) {
			s.t.Fatalf("answer = %+v, want pending", a)
		}
		s.tamper(map[string]any{"status": StatusDiscarded, "phase": phaseFinished})
		for _, body := range []string{theIntent, theIntent} {
			if a := s.call(body, s.made); !errors.Is(a.err, ErrDiscarded) {
				s.t.Errorf("retry = %+v, want ErrDiscarded", a)
			}
		}
		if a := s.call(`{"n":2}`, s.made); !errors.Is(a.err, ErrKeyReused) {
			s.t.Errorf("another intent = %+v, want ErrKeyReused", a)
		}
		s.wantRuns(1)
		if r := s.record(); r == nil || r.Status != StatusDiscarded {
			s.t.Fatalf("record = %+v, want still discarded", r)
		}
		s.tamper(map[string]any{"expires_at": dbtime.Now().Add(-time.Second)})
		if a := s.call(`{"n":2}`, s.made); a.err != nil || a.status != http.StatusCreated {
			s.t.Errorf("another intent once expired = %+v, want it executed", a)
		}
		s.wantRuns(2)
		if r := s.record(); r == nil || r.Status != StatusCompleted || r.Attempts != 1 {
			s.t.Errorf("record = %+v, want a new intent, completed", r)
		}
	}},
}

// Every duplicate scenario, through the middleware and through Do alike:
// one state machine, one behaviour.
func TestDuplicateScenarios(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		g, store := newGuard(t, db)
		for _, fr := range fronts {
			call := fr.make(g)
			for i, sc := range scenarios {
				t.Run(fr.name+"/"+sc.name, func(t *testing.T) {
					key := fmt.Sprintf("%s-%d", fr.name, i)
					s := &stage{t: t, db: db, store: store, scope: scope{ConsumerID: "c1", Operation: fr.op, Key: key}}
					s.call = func(body string, w work) answer { return call(key, body, w) }
					sc.play(s)
				})
			}
		}
	})
}

// Fifty concurrent calls with one key: fn runs exactly once; every other
// call is told it is in progress or gets the stored result.
func TestDoRunsOnceUnderFiftyConcurrentCalls(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		g, _ := newGuard(t, db)
		var runs, replays, busy atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 50 {
			wg.Go(func() {
				<-start
				res, replayed, err := g.Do(context.Background(), scope{ConsumerID: "c1", Operation: "jobs.run", Key: "job-1"}, nil,
					func(context.Context) (Response, error) {
						runs.Add(1)
						time.Sleep(5 * time.Millisecond)
						return Response{Status: http.StatusOK, Body: []byte("done")}, nil
					})
				switch {
				case errors.Is(err, ErrInProgress):
					busy.Add(1)
				case err != nil:
					t.Errorf("Do: %v", err)
				case string(res.Body) != "done":
					t.Errorf("Do = %+v", res)
				case replayed:
					replays.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if runs.Load() != 1 {
			t.Fatalf("fn ran %d times, want exactly 1 (%d replays, %d in progress)", runs.Load(), replays.Load(), busy.Load())
		}
		if got := 1 + replays.Load() + busy.Load(); got != 50 {
			t.Errorf("%d calls accounted for, want 50", got)
		}
	})
}

// Do's own contract: what it refuses before touching the store, the result
// and outcome it replays, the intent it keeps for a Resumer, and the
// detached, budgeted context fn runs on.
func TestDoContract(t *testing.T) {
	db := testdb.New(t, "sqlite")
	g, store := newGuard(t, db)
	ctx := context.Background()
	never := func(context.Context) (Response, error) { t.Error("fn ran"); return Response{}, nil }
	for _, tt := range []struct {
		key  string
		want error
	}{{"", ErrKeyMissing}, {"has space", ErrKeyInvalid}, {strings.Repeat("k", 256), ErrKeyInvalid}} {
		if _, _, err := g.Do(ctx, scope{ConsumerID: "c1", Operation: "op", Key: tt.key}, nil, never); !errors.Is(err, tt.want) {
			t.Errorf("key %q: err = %v, want %v", tt.key, err, tt.want)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := g.Do(done, scope{ConsumerID: "c1", Operation: "op", Key: "k0"}, nil, never); !errors.Is(err, context.Canceled) {
		t.Errorf("a done context: err = %v", err)
	}
	if r, _ := store.find(ctx, scope{ConsumerID: "c1", Operation: "op", Key: "k0"}); r != nil {
		t.Errorf("a done context left a record: %+v", r)
	}

	// A zero result with no error had its effect (200); the outcome replays.
	sc := scope{ConsumerID: "c1", Operation: "op", Key: "k1"}
	caller, hangUp := context.WithCancel(ctx)
	res, replayed, err := g.Do(caller, sc, []byte(`{"b":1,"a":2}`), func(ctx context.Context) (Response, error) {
		hangUp() // the caller goes away mid-work: the work goes on
		if ctx.Err() != nil {
			t.Errorf("fn's context ended with its caller's: %v", ctx.Err())
		}
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > WorkBudget(time.Minute) {
			t.Errorf("fn's deadline = %v, %v; want within the work budget", d, ok)
		}
		return Response{ResourceType: "thing", ResourceID: "7"}, nil
	})
	if err != nil || replayed || res.Status != http.StatusOK {
		t.Fatalf("Do = %+v, %v, %v", res, replayed, err)
	}
	res, replayed, err = g.Do(ctx, sc, []byte(`{"a":2,"b":1}`), never)
	if err != nil || !replayed || res.Status != http.StatusOK || res.ResourceID != "7" || res.ResourceType != "thing" {
		t.Errorf("replay = %+v, %v, %v", res, replayed, err)
	}

	// A pending intent keeps its canonical intent, for the Resumer.
	sc.Key = "k2"
	if _, _, err := g.Do(ctx, sc, []byte(`{"b":1, "a":2}`), func(context.Context) (Response, error) {
		return Response{}, unknownOutcome{}
	}); !errors.Is(err, ErrPending) {
		t.Fatalf("err = %v, want ErrPending", err)
	}
	var body []byte
	if err := db.Gorm.Model(&Record{}).Where("idempotency_key = ?", "k2").Select("request_body").Row().Scan(&body); err != nil {
		t.Fatal(err)
	}
	// Stored sealed (an event's intent may carry a license key), it opens
	// to the canonical intent.
	if opened, err := testCipher(t).Decrypt(string(body)); err != nil || string(opened) != `{"a":2,"b":1}` {
		t.Errorf("request_body = %s, opens to %s (%v); want the canonical intent, sealed", body, opened, err)
	}

	// A Do intent and a request never share a fingerprint.
	if fingerprint(doMethod, "things.store", nil) == fingerprint(http.MethodPost, "things.store", nil) {
		t.Error("a Do call's fingerprint is a request's")
	}
}
