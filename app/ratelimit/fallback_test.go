package ratelimit

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// watched is a Limiter's configuration with what it reports captured: its
// log, its local counts and its degraded states.
type watched struct {
	logs     *testkit.Buffer
	local    atomic.Int64
	degraded []bool // appended under the fallback's mutex
}

func watch(cfg Config) (Config, *watched) {
	w := &watched{logs: &testkit.Buffer{}}
	cfg.Log = slog.New(slog.NewJSONHandler(w.logs, nil))
	cfg.CountedLocally = func() { w.local.Add(1) }
	cfg.Degraded = func(on bool) { w.degraded = append(w.degraded, on) }
	return cfg, w
}

// lines counts the log lines that hold msg.
func (w *watched) lines(msg string) int { return strings.Count(w.logs.String(), msg) }

// renameRateLimits moves the rate_limits table away (the store fails) and
// returns the function that brings it back.
func renameRateLimits(t *testing.T, db *testdb.DB) (restore func()) {
	t.Helper()
	if err := db.Gorm.Exec("ALTER TABLE rate_limits RENAME TO rate_limits_away").Error; err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := db.Gorm.Exec("ALTER TABLE rate_limits_away RENAME TO rate_limits").Error; err != nil {
			t.Fatal(err)
		}
	}
}

// takeN takes n requests of consumer, a second apart from at, and says how
// many were allowed; every one must be counted locally, or none.
func takeN(t *testing.T, l *Limiter, consumer string, at time.Time, n int, local bool) (allowed int) {
	t.Helper()
	for i := range n {
		r, err := l.Take(context.Background(), consumer, at.Add(time.Duration(i)*time.Second))
		if err != nil || r.Local != local {
			t.Fatalf("take %d: %+v, %v; want Local %v", i+1, r, err, local)
		}
		if r.Allowed {
			allowed++
		}
	}
	return allowed
}

// The database store failing (its table gone: a statement that fails while
// the database serves) on SQLite and MariaDB: the replica holds the limit
// alone, says so once, and when the table answers again counts there
// again, where it left off, and says that once too.
func TestRateLimitDatabaseFailingHoldsTheLimitLocally(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		cfg, w := watch(Config{PerMinute: 5, Store: StoreDatabase, DB: db.Gorm, Retry: database.RetryOnConflict, Unavailable: database.IsUnreachable})
		l := newLimiter(t, cfg)
		a := consumerID(1)
		if got := take(t, l, a, t0); got != (Result{Limit: 5, Remaining: 4, Allowed: true}) {
			t.Fatalf("in the table: %+v", got)
		}
		restore := renameRateLimits(t, db)
		if n := takeN(t, l, a, t0.Add(time.Second), 20, true); n != 5 {
			t.Errorf("%d of 20 allowed with the table gone, want 5", n)
		}
		if w.local.Load() != 20 || len(w.degraded) != 1 || !w.degraded[0] || w.lines(DegradedMessage) != 1 {
			t.Errorf("counted locally %d, degraded %v, %d lines; want 20, [true], 1:\n%s", w.local.Load(), w.degraded, w.lines(DegradedMessage), w.logs)
		}
		restore()
		if got := take(t, l, a, t0.Add(30*time.Second)); got != (Result{Limit: 5, Remaining: 3, Allowed: true}) {
			t.Errorf("the table back: %+v, want its count (2 of 5)", got)
		}
		if len(w.degraded) != 2 || w.degraded[1] || w.lines(RecoveredMessage) != 1 || !strings.Contains(w.logs.String(), `"counted_locally":19`) {
			t.Errorf("degraded %v, %d lines %q; want [true false], one line counting the 19 untold:\n%s", w.degraded, w.lines(RecoveredMessage), RecoveredMessage, w.logs)
		}
		take(t, l, a, t0.Add(31*time.Second))
		if w.local.Load() != 20 || len(w.degraded) != 2 || w.lines(RecoveredMessage) != 1 {
			t.Errorf("counted locally %d, degraded %v after another request in the table: nothing more wanted", w.local.Load(), w.degraded)
		}
	})
}

// A closed database is unavailable in general: the request fails (a 503)
// as it would anyway, and is never served without a limit.
func TestRateLimitDatabaseClosedFailsTheRequest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		sqlDB, err := db.Gorm.DB()
		if err != nil {
			t.Fatal(err)
		}
		cfg, w := watch(Config{PerMinute: 5, Store: StoreDatabase, DB: db.Gorm, Retry: database.RetryOnConflict, Unavailable: database.IsUnreachable})
		l := newLimiter(t, cfg)
		if err := sqlDB.Close(); err != nil {
			t.Fatal(err)
		}
		if r, err := l.Take(context.Background(), consumerID(1), t0); err == nil || r.Allowed {
			t.Errorf("Take = %+v, %v; want the database's error", r, err)
		}
		if w.local.Load() != 0 {
			t.Errorf("counted locally %d, want 0: the request fails", w.local.Load())
		}
	})
}

// FallbackShare is what one replica allows alone: 0.4 of 5 is 2, the
// headers' limit while counting alone; a share too small for one request
// still allows one.
func TestRateLimitFallbackShare(t *testing.T) {
	for _, tt := range []struct {
		perMinute int
		share     float64
		want      int
	}{{5, 0.4, 2}, {5, 0, 5}, {5, 1, 5}, {600, 1.0 / 3, 200}, {600, 0.333, 200}, {3, 0.01, 1}, {5, 1.5, 5}} {
		l := newLimiter(t, Config{PerMinute: tt.perMinute, Store: StoreRedis, RedisURL: "redis://127.0.0.1:1/0", FallbackShare: tt.share})
		if got := l.local.limit; got != tt.want {
			t.Errorf("%v of %d: %d, want %d", tt.share, tt.perMinute, got, tt.want)
		}
	}
	l := newLimiter(t, Config{PerMinute: 5, Store: StoreRedis, RedisURL: deadRedis(t), FallbackShare: 0.4})
	for i, want := range []Result{
		{Limit: 2, Remaining: 1, Allowed: true, Local: true},
		{Limit: 2, Remaining: 0, Allowed: true, Local: true},
		{Limit: 2, Remaining: 0, RetryAfter: 60 * time.Second, Local: true}, // the window began at the first request
	} {
		if got := take(t, l, consumerID(1), t0.Add(10*time.Second)); got != want {
			t.Errorf("take %d = %+v, want %+v", i+1, got, want)
		}
	}
}

// The local counts hold the consumers of one window: the first request
// counted alone in a later window, or the store answering again, drops
// those of the windows that are over.
func TestRateLimitLocalCountsAreBounded(t *testing.T) {
	l := newLimiter(t, Config{PerMinute: 10, Store: StoreRedis, RedisURL: deadRedis(t)})
	m := l.local.counter
	for i := range 1000 {
		take(t, l, consumerID(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(m.entries); n != 1000 {
		t.Fatalf("entries = %d, want 1000", n)
	}
	take(t, l, consumerID(0), t0.Add(Window+time.Second))
	if n := len(m.entries); n != 1 {
		t.Errorf("after a new window: entries = %d, want 1", n)
	}
	l.local.shared(t0.Add(3 * Window)) // consumer 0's window, from t0+61s, is over
	if n := len(m.entries); n != 0 {
		t.Errorf("after the store answered in a later window: entries = %d, want 0", n)
	}
}

// Flapping (the store failing and answering in turn) writes at most one
// line each way a window, and the gauge follows each change.
func TestRateLimitFlappingStoreLogsOnceAWindow(t *testing.T) {
	cfg, w := watch(Config{PerMinute: 100, Store: StoreRedis, RedisURL: deadRedis(t)})
	l := newLimiter(t, cfg)
	for i := range 10 {
		now := t0.Add(time.Duration(i) * time.Second)
		take(t, l, consumerID(1), now)
		l.local.shared(now)
	}
	if w.lines(DegradedMessage) != 1 || w.lines(RecoveredMessage) != 1 || len(w.degraded) != 20 {
		t.Errorf("%d and %d lines, %d gauge changes; want 1, 1 and 20:\n%s", w.lines(DegradedMessage), w.lines(RecoveredMessage), len(w.degraded), w.logs)
	}
	take(t, l, consumerID(1), t0.Add(Window))
	if w.lines(DegradedMessage) != 2 || !strings.Contains(w.logs.String(), `"counted_locally":10`) {
		t.Errorf("a window later:\n%s\nwant a second line counting the 9 untold and this one", w.logs)
	}
}

// Many goroutines at once, one consumer, Redis down: the replica alone
// allows exactly the limit, counts every request once, and enters the
// degraded state once.
func TestRateLimitLocalCountUnderConcurrency(t *testing.T) {
	cfg, w := watch(Config{PerMinute: 50, Store: StoreRedis, RedisURL: deadRedis(t)})
	l := newLimiter(t, cfg)
	const workers, each = 8, 25
	allowed, _, local := takeAcross(t, []*Limiter{l}, workers, each)
	if local.Load() != workers*each {
		t.Errorf("%d of %d counted locally, want every one", local.Load(), workers*each)
	}
	if got := allowed.Load(); got != 50 {
		t.Errorf("%d of %d allowed, want exactly 50", got, workers*each)
	}
	if w.local.Load() != workers*each || len(w.degraded) != 1 || w.lines(DegradedMessage) != 1 {
		t.Errorf("counted locally %d, degraded %v, %d lines; want %d, [true], 1", w.local.Load(), w.degraded, w.lines(DegradedMessage), workers*each)
	}
}
