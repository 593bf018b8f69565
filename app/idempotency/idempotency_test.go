package idempotency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// harness is a bare Echo with one guarded route, "things.store", whose
// work the test sets.
type harness struct {
	t     testing.TB
	e     *echo.Echo
	store *Store
	run   runFunc
	runs  atomic.Int32
}

func newHarness(t testing.TB, db *testdb.DB) *harness {
	t.Helper()
	return newHarnessWith(t, db, testCipher(t))
}

// newHarnessWith is newHarness with a Cipher of the test's choosing.
func newHarnessWith(t testing.TB, db *testdb.DB, c Cipher) *harness {
	t.Helper()
	h := &harness{t: t, e: echo.New(), store: NewStore(db.Gorm, c, nil, nil)}
	op := testOperation("things.store", func(ctx context.Context) (Response, error) {
		h.runs.Add(1)
		return h.run(ctx)
	})
	g := newTestGuard(t, Config{Store: h.store, TTL: time.Hour, LockTimeout: time.Minute}, op)
	h.e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // app/http's recover, in small
		return func(c echo.Context) (err error) {
			defer func() {
				if recover() != nil {
					err = echo.ErrInternalServerError
				}
			}()
			return next(c)
		}
	})
	h.e.POST("/things", op.Handler(g, headerCall))
	return h
}

func (h *harness) post(key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/things", strings.NewReader(body))
	req.Header.Set("X-Consumer", "c1")
	req.Header.Set(HeaderKey, key)
	rec := httptest.NewRecorder()
	h.e.ServeHTTP(rec, req)
	return rec
}

func TestPanicReleasesTheKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		h := newHarness(t, db)
		h.run = func(context.Context) (Response, error) { panic("boom") }
		if got := h.post("k", `{}`).Code; got != http.StatusInternalServerError {
			t.Fatalf("status = %d, want 500", got)
		}
		if rec, _ := h.store.find(context.Background(), scope{"c1", "things.store", "k"}); rec == nil || rec.Status != statusAbandoned {
			t.Fatalf("after a panic the record is %+v, want it kept abandoned (its fingerprint alone)", rec)
		}
		h.run = text(http.StatusCreated, "made")
		if got := h.post("k", `{}`).Code; got != http.StatusCreated {
			t.Errorf("retry status = %d, want 201", got)
		}
	})
}

func TestReplayIsByteIdenticalForAnyBody(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		h := newHarness(t, db)
		h.run = respondWith(Response{Status: http.StatusCreated,
			Headers: map[string]string{"Content-Type": "text/plain; charset=utf-8", "Location": "/things/1"},
			Body:    []byte("  raw\x00bytes\n")})
		first := h.post("k", "not json at all")
		second := h.post("k", "not json at all")
		if second.Code != http.StatusCreated || second.Body.String() != first.Body.String() ||
			second.Header().Get("Content-Type") != "text/plain; charset=utf-8" || second.Header().Get("Location") != "/things/1" {
			t.Errorf("replay = %d %q %v", second.Code, second.Body.String(), second.Header())
		}
		if h.runs.Load() != 1 {
			t.Errorf("handler ran %d times", h.runs.Load())
		}
		if got := h.post("k", "other raw bytes").Code; got != http.StatusUnprocessableEntity && got != http.StatusInternalServerError {
			// a bare Echo renders ErrKeyReused as 500; app/http maps it to 422
			t.Errorf("another raw body: status %d", got)
		}
	})
}

func TestFailedRecordIsExecutedAgain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		h := newHarness(t, db)
		h.run = text(http.StatusCreated, "ok")
		h.post("k", `{"a":1}`)
		if err := db.Gorm.Model(&Record{}).Where("idempotency_key = ?", "k").
			Updates(map[string]any{"status": StatusFailed, "locked_until": nil}).Error; err != nil {
			t.Fatal(err)
		}
		if got := h.post("k", `{"a":1}`); got.Code != http.StatusCreated || got.Header().Get(headerReplayed) != "" {
			t.Errorf("failed record: %d replayed=%q, want a new execution", got.Code, got.Header().Get(headerReplayed))
		}
		if h.runs.Load() != 2 {
			t.Errorf("handler ran %d times, want 2", h.runs.Load())
		}
	})
}

// Many contenders take over one abandoned record at once: exactly one wins.
func TestTakeOverIsACompareAndSet(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		now := dbtime.Now()
		past := now.Add(-time.Second)
		rec := &Record{ConsumerID: "c1", Operation: "op", Key: "k", RequestHash: "h", Status: statusProcessing,
			LockedUntil: &past, Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if _, ok, err := s.reserve(ctx, rec); !ok || err != nil {
			t.Fatalf("Reserve = %v, %v", ok, err)
		}
		read, _ := s.find(ctx, rec.scope())
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 20 {
			wg.Go(func() {
				lease := now.Add(time.Minute + time.Duration(i)*time.Millisecond)
				mine := &Record{RequestHash: "h", LockedUntil: &lease, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
				<-start
				won, err := s.takeOver(ctx, read, mine)
				if err != nil {
					t.Error(err)
				}
				if won {
					wins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d contenders won the take-over, want exactly 1", wins.Load())
		}
		after, _ := s.find(ctx, rec.scope())
		if after.Attempts != 2 || !after.LockedUntil.After(now) {
			t.Errorf("after take-over: attempts %d lease %v", after.Attempts, after.LockedUntil)
		}
	})
}

func TestCanonical(t *testing.T) {
	tests := []struct{ a, b string }{
		{`{"domain":"a.test","name":"A"}`, `{ "name": "A", "domain": "a.test" }`},
		{`{"x":{"b":1,"a":[1,{"d":2,"c":3}]}}`, "{\n\"x\":{\"a\":[1,{\"c\":3,\"d\":2}],\"b\":1}}"},
		{`{"n":1.50}`, `{"n": 1.50}`},
		{`{"s":"<&>"}`, `{"s":"<&>"}`},
	}
	for _, tt := range tests {
		if ca, cb := string(canonicalJSON([]byte(tt.a))), string(canonicalJSON([]byte(tt.b))); ca != cb {
			t.Errorf("Canonical differs:\n%s → %s\n%s → %s", tt.a, ca, tt.b, cb)
		}
	}
	if got := string(canonicalJSON([]byte(`{"b":1,"a":2}`))); got != `{"a":2,"b":1}` {
		t.Errorf("Canonical = %s", got)
	}
	if got := string(canonicalJSON([]byte("not json"))); got != "not json" {
		t.Errorf("a non-JSON body changed: %q", got)
	}
	if fingerprint("POST", "/a", []byte("x")) == fingerprint("POST", "/b", []byte("x")) {
		t.Error("the route is not part of the fingerprint")
	}
	if d := NewStore(nil, testCipher(t), nil, nil).KeyDigest("secret"); strings.Contains(d, "secret") || len(d) != 12 {
		t.Errorf("KeyDigest = %q", d)
	}
}
