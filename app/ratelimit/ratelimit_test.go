package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// consumerID is a consumer id of the length the rate_limits table takes.
func consumerID(i int) string { return fmt.Sprintf("01J00000000000000000%06d", i) }

// t0 is the start of a clock minute.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// newLimiter is New, failing the test on an error, with the limiter closed
// when the test ends.
func newLimiter(t testing.TB, cfg Config) *Limiter {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// eachCounter runs fn with a limiter of every kind: in memory, shared in
// the database of each dialect, and shared in Redis (when TEST_REDIS_URL
// is set). another makes one more limiter on the same store, as another
// replica would (another process, for memory).
func eachCounter(t *testing.T, perMinute int, fn func(t *testing.T, l *Limiter, another func() *Limiter)) {
	t.Run("memory", func(t *testing.T) {
		cfg := Config{PerMinute: perMinute}
		fn(t, newLimiter(t, cfg), func() *Limiter { return newLimiter(t, cfg) })
	})
	t.Run("shared", func(t *testing.T) {
		testdb.Each(t, func(t *testing.T, db *testdb.DB) {
			cfg := Config{PerMinute: perMinute, Store: StoreDatabase, DB: db.Gorm}
			fn(t, newLimiter(t, cfg), func() *Limiter { return newLimiter(t, cfg) })
		})
	})
	t.Run("redis", func(t *testing.T) {
		url := testdb.RedisURL(t)
		cfg := Config{PerMinute: perMinute, Store: StoreRedis, RedisURL: url, KeyPrefix: testdb.RedisPrefix(t, url)}
		fn(t, newLimiter(t, cfg), func() *Limiter { return newLimiter(t, cfg) })
	})
}

func take(t *testing.T, l *Limiter, consumer string, now time.Time) Result {
	t.Helper()
	r, err := l.Take(context.Background(), consumer, now)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return r
}

// A consumer's window starts at its first request (t0+15s here) and lasts
// a minute, as Laravel's RateLimiter::hit starts its timer (the window rule
// changed from clock minutes: a refusal's RetryAfter was 45s, to t0+1m).
func TestRateLimitCountsPerConsumerAndWindow(t *testing.T) {
	eachCounter(t, 3, func(t *testing.T, l *Limiter, _ func() *Limiter) {
		a, b := consumerID(1), consumerID(2)
		now := t0.Add(15 * time.Second)
		for i, want := range []Result{
			{Limit: 3, Remaining: 2, Allowed: true},
			{Limit: 3, Remaining: 1, Allowed: true},
			{Limit: 3, Remaining: 0, Allowed: true},
			{Limit: 3, Remaining: 0, RetryAfter: 60 * time.Second},
			{Limit: 3, Remaining: 0, RetryAfter: 60 * time.Second},
		} {
			if got := take(t, l, a, now); got != want {
				t.Errorf("take %d = %+v, want %+v", i+1, got, want)
			}
		}
		if got := take(t, l, b, now); got != (Result{Limit: 3, Remaining: 2, Allowed: true}) {
			t.Errorf("another consumer = %+v, want its own window", got)
		}
		if got := take(t, l, a, now.Add(59*time.Second+500*time.Millisecond)); got.Allowed || got.RetryAfter != 500*time.Millisecond {
			t.Errorf("at the window's last second = %+v, want refused for 500ms", got)
		}
		if got := take(t, l, a, now.Add(Window)); got != (Result{Limit: 3, Remaining: 2, Allowed: true}) {
			t.Errorf("next window = %+v, want a fresh count", got)
		}
	})
}

func TestRateLimitOff(t *testing.T) {
	for _, store := range []string{StoreMemory, StoreDatabase, StoreRedis} {
		// No DB, and a Redis nothing listens on: neither may be touched.
		l := newLimiter(t, Config{PerMinute: 0, Store: store, RedisURL: "redis://127.0.0.1:1/0"})
		for range 3 {
			if got := take(t, l, consumerID(1), t0); got != (Result{Allowed: true}) {
				t.Errorf("%s: %+v, want allowed with Limit 0", store, got)
			}
		}
	}
}

// The in-process counter holds the consumers of the windows under way only:
// the first request of a new clock minute drops the windows that are over.
func TestRateLimitMemoryIsBounded(t *testing.T) {
	l := newLimiter(t, Config{PerMinute: 10})
	m := l.counter.(*memoryCounter)
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
	// A consumer's window that began in the last minute is kept, swept once
	// it is over.
	if got := take(t, l, consumerID(5), t0.Add(59*time.Second)); got.Remaining != 9 {
		t.Errorf("late request = %+v, want a count of its own", got)
	}
	take(t, l, consumerID(0), t0.Add(2*Window))
	if n := len(m.entries); n != 1 {
		t.Errorf("after another window: entries = %d, want 1", n)
	}
}

// Concurrent requests of one consumer each get a count of their own, in
// one process and across replicas sharing the database.
func TestRateLimitConcurrentTakesCountEachOnce(t *testing.T) {
	eachCounter(t, 1000, func(t *testing.T, l *Limiter, another func() *Limiter) {
		limiters := []*Limiter{l, l}
		if l.cfg.Store != StoreMemory { // a second replica on the same store
			limiters[1] = another()
		}
		const workers, each = 8, 25
		var mu sync.Mutex
		seen := map[int]bool{}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range each {
					r, err := limiters[w%2].Take(context.Background(), consumerID(1), t0)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					seen[r.Remaining] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != workers*each {
			t.Errorf("%d distinct counts, want %d: an increment was lost or shared", len(seen), workers*each)
		}
		if got := take(t, l, consumerID(1), t0); got.Remaining != 1000-workers*each-1 {
			t.Errorf("remaining = %d, want %d", got.Remaining, 1000-workers*each-1)
		}
	})
}

// The first request of a clock minute deletes the rows of consumers whose
// window ended more than a minute ago, one batch at a time while batches
// come back full. (The window rule changed: a row is a consumer's, no
// longer a window's, so a new window reuses it.)
func TestRateLimitSharedPrunesPastWindows(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		l := newLimiter(t, Config{PerMinute: 10, Store: StoreDatabase, DB: db.Gorm})
		l.counter.(*sqlCounter).pruneBatch = 2
		for i := range 5 {
			take(t, l, consumerID(i), t0) // five rows, windows from t0
		}
		take(t, l, consumerID(0), t0.Add(Window)) // a new window of consumer 0, in its row
		rows := func() (n int64) {
			if err := db.Gorm.Table("rate_limits").Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := rows(); n != 5 {
			t.Fatalf("rows = %d, want 5 (one a consumer)", n)
		}
		later := t0.Add(3 * Window)                // the windows from t0 ended over a minute ago; consumer 0's not
		for i, want := range []int64{4, 2, 2, 2} { // +1 row -2, -2, -0, then nothing more this minute
			take(t, l, consumerID(9), later)
			if n := rows(); n != want {
				t.Errorf("after take %d: rows = %d, want %d", i+1, n, want)
			}
		}
	})
}

// A failed count is counted in this process against the limit (Local),
// unless the database is unavailable in general: that error comes back as
// it is. (It was served without a limit before: the limit now degrades to
// the replica's share instead of lifting.)
func TestRateLimitFailures(t *testing.T) {
	empty := testdb.Empty(t, "sqlite") // no rate_limits table
	down := errors.New("down")
	l := newLimiter(t, Config{PerMinute: 5, Store: StoreDatabase, DB: empty.Gorm})
	if r, err := l.Take(context.Background(), consumerID(1), t0); err != nil || r != (Result{Limit: 5, Remaining: 4, Allowed: true, Local: true}) {
		t.Errorf("Take = %+v, %v; want counted locally, 4 remaining", r, err)
	}
	l = newLimiter(t, Config{PerMinute: 5, Store: StoreDatabase, DB: empty.Gorm, Unavailable: func(error) bool { return true }})
	if r, err := l.Take(context.Background(), consumerID(1), t0); err == nil || r.Allowed {
		t.Errorf("Take = %+v, %v; want the database's own error", r, err)
	}
	// A request whose context ended is never counted locally: on MySQL the
	// statement stops with the context's error, as it is; on SQLite it does
	// not watch the context (busy_timeout bounds it, see database.Query)
	// and counts the request.
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		l := newLimiter(t, Config{PerMinute: 5, Store: StoreDatabase, DB: db.Gorm})
		d, err := l.Take(ctx, consumerID(1), t0)
		if db.Dialect == database.SQLite {
			if err != nil || d.Remaining != 4 || d.Local {
				t.Errorf("ended context on SQLite: %+v, %v; want the request counted in the table (4 remaining)", d, err)
			}
			return
		}
		if !errors.Is(err, context.Canceled) || d.Allowed {
			t.Errorf("ended context: %+v, err = %v, want context.Canceled as it is", d, err)
		}
	})
	retried := 0
	logs := &testkit.Buffer{}
	l = newLimiter(t, Config{PerMinute: 5, Store: StoreDatabase, DB: empty.Gorm, Unavailable: func(error) bool { return false },
		Log: slog.New(slog.NewJSONHandler(logs, nil)),
		Retry: func(_ context.Context, stmt func() *gorm.DB) *gorm.DB {
			retried++
			return &gorm.DB{Error: down}
		}})
	if r, err := l.Take(context.Background(), consumerID(1), t0); err != nil || !r.Local {
		t.Errorf("Take = %+v, %v; want counted locally", r, err)
	}
	if !strings.Contains(logs.String(), `"error":"ratelimit: the store did not count the request: down"`) {
		t.Errorf("log:\n%s\nwant the statement's error", logs.String())
	}
	if retried != 1 {
		t.Errorf("Retry called %d times, want 1", retried)
	}
}

// With Batch, three replicas counting one consumer's requests in the
// database's rate_limits table hold the limit with one upsert per batch
// (checkBatch), on both databases.
func TestRateLimitDatabaseBatchHoldsTheLimitWithFewerRoundTrips(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		cfg := Config{PerMinute: batchLimit, Store: StoreDatabase, DB: db.Gorm, Retry: database.RetryOnConflict}
		checkBatch(t, cfg, func(_ *Limiter, consumer string) int64 {
			var n int64
			if err := db.Gorm.Table("rate_limits").Select("hits").Where("consumer_id = ?", consumer).Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		})
	})
}

// BenchmarkRateLimitTake is the limiter's cost per request: in memory (the
// SQLite default), shared in Redis, and shared in the database (the MySQL
// default; SQLite's too, for comparison), one consumer and many.
//
//	go test -run '^$' -bench RateLimitTake -benchmem ./app/ratelimit/
//	TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' TEST_REDIS_URL=redis://127.0.0.1:6379/0 \
//	  go test -run '^$' -bench RateLimitTake -benchmem ./app/ratelimit/
func BenchmarkRateLimitTake(b *testing.B) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = consumerID(i)
	}
	run := func(b *testing.B, l *Limiter) {
		b.Run("one-consumer", func(b *testing.B) {
			for b.Loop() {
				if _, err := l.Take(context.Background(), ids[0], t0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("1000-consumers", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := l.Take(context.Background(), ids[i%len(ids)], t0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					if _, err := l.Take(context.Background(), ids[i%len(ids)], t0); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("memory", func(b *testing.B) { run(b, newLimiter(b, Config{PerMinute: 1 << 30})) })
	b.Run("redis", func(b *testing.B) {
		url := testdb.RedisURL(b)
		run(b, newLimiter(b, Config{PerMinute: 1 << 30, Store: StoreRedis, RedisURL: url, KeyPrefix: testdb.RedisPrefix(b, url)}))
	})
	for _, dialect := range []string{"sqlite", "mysql"} {
		b.Run("shared-"+dialect, func(b *testing.B) {
			db := testdb.New(b, dialect)
			run(b, newLimiter(b, Config{PerMinute: 1 << 30, Store: StoreDatabase, DB: db.Gorm}))
			// For scale: one parameterised statement that writes nothing, the
			// floor of any Take that asks the database.
			b.Run("baseline-select", func(b *testing.B) {
				var n int64
				for b.Loop() {
					if err := db.Gorm.WithContext(context.Background()).Raw("SELECT ?", 1).Scan(&n).Error; err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// No 60 s span holds more than the limit, however it straddles a clock
// minute: Laravel's RateLimiter::hit (throttle:api, a decay of 60 s) starts
// a consumer's window at its first request and the next one at the first
// request after it ends. With clock-minute windows, 3 requests at t0+50s
// and 3 more at t0+61s would all pass: twice the limit in 11 s.
func TestRateLimitNoSpanOf60sHoldsMoreThanTheLimit(t *testing.T) {
	const limit = 3
	eachCounter(t, limit, func(t *testing.T, l *Limiter, _ func() *Limiter) {
		c := consumerID(3)
		var passed []time.Time
		for i := range 240 { // every half second, t0+50s to t0+170s, across two clock minutes
			at := t0.Add(50*time.Second + time.Duration(i)*500*time.Millisecond)
			r := take(t, l, c, at)
			if r.Allowed {
				passed = append(passed, at)
			} else if end := at.Add(r.RetryAfter); r.RetryAfter <= 0 || r.RetryAfter > Window {
				t.Fatalf("at %v: RetryAfter %v (window's end %v)", at.Sub(t0), r.RetryAfter, end)
			}
		}
		for i, first := range passed {
			n := 0
			for _, p := range passed[i:] {
				if p.Sub(first) < Window {
					n++
				}
			}
			if n > limit {
				t.Fatalf("%d requests passed in the 60 s from t0+%v, want at most %d (passed at %v)", n, first.Sub(t0), limit, offsets(passed))
			}
		}
		// The windows: from the first request (t0+50s), then from the first
		// after it ended (t0+110s).
		want := []time.Duration{50 * time.Second, 50500 * time.Millisecond, 51 * time.Second,
			110 * time.Second, 110500 * time.Millisecond, 111 * time.Second}
		if got := offsets(passed); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("passed at %v, want %v", got, want)
		}
	})
}

// offsets is each time's distance from t0.
func offsets(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, at := range ts {
		out[i] = at.Sub(t0)
	}
	return out
}
