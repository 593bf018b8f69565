package idempotency

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Retries of one key racing its owner's release: on MySQL an INSERT on a
// duplicate key and a DELETE of that key deadlock under contention. No
// statement may surface that as an error (a 500, or a record stuck
// processing for a whole lease).
func TestReserveAndReleaseUnderContention(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 100 {
					now := dbtime.Now()
					lease := now.Add(time.Minute + time.Duration(g*1000+i)*time.Microsecond)
					r := &Record{ConsumerID: "c1", Operation: "op", Key: "k", RequestHash: "h", Status: statusProcessing,
						LockedUntil: &lease, Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
					_, ok, err := s.reserve(context.Background(), r)
					if ok {
						err = s.release(context.Background(), r)
					}
					if err != nil && !errors.Is(err, errRaced) {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Errorf("%d statements failed under contention; first: %v", len(errs), errs[0])
		}
	})
}

// An accepted intent is settled by the reconciler, never replaced: not by
// another request with its key, not even once it has expired.
func TestPendingRecordIsNeverTakenOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		h := newHarness(t, db)
		h.run = text(http.StatusCreated, "new")
		old := time.Now().UTC().Add(-25 * time.Hour).Truncate(time.Microsecond)
		r := &Record{ConsumerID: "c1", Operation: "things.store", Key: "k", RequestHash: "the-accepted-intent",
			RequestBody: []byte(`{"domain":"a.test"}`), Status: StatusPending, Attempts: 1,
			CreatedAt: old, UpdatedAt: old, ExpiresAt: old.Add(24 * time.Hour)}
		if _, ok, err := h.store.reserve(context.Background(), r); !ok {
			t.Fatal(err)
		}
		h.post("k", `{"domain":"b.test"}`)
		if h.runs.Load() != 0 {
			t.Fatal("another request replaced an expired pending intent")
		}
		after, _ := h.store.find(context.Background(), r.scope())
		if after.Status != StatusPending || after.RequestHash != "the-accepted-intent" {
			t.Errorf("record = %s %s, want the pending intent untouched", after.Status, after.RequestHash)
		}
	})
}

type panickingResumer struct{}

func (panickingResumer) Resume(context.Context, *Execution, *Record, bool) (Response, bool, error) {
	panic("a bug in a resumer")
}

// A panic in a Resumer is a failed attempt, counted and backed off, not the
// end of the serve process.
func TestReconcilerSurvivesAPanickingResumer(t *testing.T) {
	db := testdb.New(t, "sqlite")
	s := NewStore(db.Gorm, testCipher(t), nil, nil)
	now := dbtime.Now()
	r := &Record{ConsumerID: "c1", Operation: "op", Key: "k", RequestHash: "h", Status: StatusPending,
		Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, ok, err := s.reserve(context.Background(), r); !ok {
		t.Fatal(err)
	}
	op := testOperation("op", respond(http.StatusCreated, "", ""))
	op.Resume = panickingResumer{}.Resume
	ops, err := NewOperations(op)
	if err != nil {
		t.Fatal(err)
	}
	rc := NewReconciler(ReconcilerConfig{Store: s, Operations: ops, MaxAttempts: 5,
		Lease: time.Minute, Backoff: time.Second, TTL: time.Hour})
	settled, err := rc.RunOnce(context.Background())
	if err != nil || len(settled) != 1 || settled[0].Result != resultRetry {
		t.Fatalf("RunOnce = %+v, %v; want one retry", settled, err)
	}
	after, _ := s.find(context.Background(), r.scope())
	if after.Attempts != 2 || after.Status != StatusPending {
		t.Errorf("after the panic: %s, attempts %d", after.Status, after.Attempts)
	}
}

// Time spent reserving (a busy database) comes out of the handler's budget:
// the handler's deadline ends a fifth of the lease before the lease does.
func TestHandlerDeadlineEndsBeforeTheLease(t *testing.T) {
	db := testdb.New(t, "sqlite")
	const skew = 50 * time.Second // as if reserving had taken that long
	first := true
	var deadline time.Time
	op := testOperation("op", func(ctx context.Context) (Response, error) {
		deadline, _ = ctx.Deadline()
		return Response{Status: http.StatusCreated, Body: []byte("ok")}, nil
	})
	g := newTestGuard(t, Config{Store: NewStore(db.Gorm, testCipher(t), nil, nil), TTL: time.Hour, LockTimeout: time.Minute,
		Now: func() time.Time {
			if first { // the reading that starts the lease
				first = false
				return time.Now().Add(-skew)
			}
			return time.Now()
		}}, op)
	e := echo.New()
	e.POST("/x", op.Handler(g, headerCall))
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("{}"))
	req.Header.Set(HeaderKey, "k")
	e.ServeHTTP(httptest.NewRecorder(), req)
	leaseEnd := time.Now().Add(-skew).Add(time.Minute)
	if latest := leaseEnd.Add(-time.Minute / 5); deadline.After(latest) {
		t.Errorf("handler deadline is %v past lease end minus a fifth", deadline.Sub(latest).Round(time.Second))
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func TestUnreadableBodyIsTold(t *testing.T) {
	h := newHarness(t, testdb.New(t, "sqlite"))
	h.run = respond(http.StatusCreated, "", "")
	var got error
	h.e.HTTPErrorHandler = func(err error, c echo.Context) { got = err; _ = c.NoContent(http.StatusBadRequest) }
	req := httptest.NewRequest(http.MethodPost, "/things", failingReader{})
	req.Header.Set("X-Consumer", "c1")
	req.Header.Set(HeaderKey, "k")
	h.e.ServeHTTP(httptest.NewRecorder(), req)
	if !errors.Is(got, ErrBodyUnreadable) || h.runs.Load() != 0 {
		t.Errorf("error = %v (runs %d), want ErrBodyUnreadable and no execution", got, h.runs.Load())
	}
}
