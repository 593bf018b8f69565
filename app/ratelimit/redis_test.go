package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// redisLimiter is a limiter on the test's Redis (TEST_REDIS_URL), with a
// key prefix of the test's own.
func redisLimiter(t *testing.T, perMinute int) (*Limiter, Config) {
	t.Helper()
	u := testdb.RedisURL(t)
	cfg := Config{PerMinute: perMinute, Store: StoreRedis, RedisURL: u, KeyPrefix: testdb.RedisPrefix(t, u)}
	return newLimiter(t, cfg), cfg
}

// A consumer's window is one key, named by the consumer (a hash of the
// window's start and count), that expires a window after the window ends
// at the latest: keys never pile up.
func TestRateLimitRedisKey(t *testing.T) {
	l, cfg := redisLimiter(t, 5)
	take(t, l, consumerID(7), t0.Add(10*time.Second))
	take(t, l, consumerID(7), t0.Add(50*time.Second))
	key := cfg.KeyPrefix + consumerID(7)
	if keys := testdb.RedisKeys(t, cfg.RedisURL, cfg.KeyPrefix+"*"); len(keys) != 1 || keys[0] != key {
		t.Fatalf("keys %v, want [%s]", keys, key)
	}
	c := l.counter.(*redisCounter).client
	ttl, err := c.TTL(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= Window || ttl > 2*Window {
		t.Errorf("TTL %v, want past the window's end by a window (%v to %v)", ttl, Window, 2*Window)
	}
	if n, err := c.HGet(context.Background(), key, "h").Int(); err != nil || n != 2 {
		t.Errorf("count %d (%v), want 2", n, err)
	}
	if s, err := c.HGet(context.Background(), key, "s").Int64(); err != nil || s != t0.Add(10*time.Second).Unix() {
		t.Errorf("start %d (%v), want the first request's second", s, err)
	}
}

// Three replicas, each with its own client (as three processes would
// have), count one consumer's requests sent by many goroutines at once:
// the window allows exactly the limit (the brief asks within 5 %), and
// refuses every request past it.
func TestRateLimitRedisThreeReplicasHoldTheLimit(t *testing.T) {
	const limit, replicas, workers, each = 300, 3, 30, 20 // 600 requests for a limit of 300
	_, cfg := redisLimiter(t, limit)
	var limiters []*Limiter
	for range replicas {
		limiters = append(limiters, newLimiter(t, cfg))
	}
	began := time.Now()
	allowed, refused, missed := takeAcross(t, limiters, workers, each)
	t.Logf("%d requests over %d replicas in %v: %d allowed, %d refused, %d counted locally",
		workers*each, replicas, time.Since(began).Round(time.Millisecond), allowed.Load(), refused.Load(), missed.Load())
	if got := allowed.Load(); got < limit*95/100 || got > limit*105/100 {
		t.Errorf("%d allowed, want %d within 5 %%", got, limit)
	}
	if missed.Load() == 0 && allowed.Load() != limit {
		t.Errorf("%d allowed with every request counted, want exactly %d", allowed.Load(), limit)
	}
	if got := allowed.Load() + refused.Load(); got != workers*each {
		t.Errorf("%d answers, want %d", got, workers*each)
	}
}

// deadRedis is a Redis URL with a password on a port nothing listens on.
func deadRedis(t *testing.T) string {
	return "redis://:s3cret-pw@" + testkit.FreeAddr(t) + "/0"
}

// With Redis down, a request is counted in this process at once, against
// the limit: of 30 requests within a minute at a limit of 5, 5 are
// allowed and 25 refused (they were all served without a limit before:
// the contract changed, the limit degrades instead of lifting). Each is
// reported for the metric, the outage is logged once a window with how many
// were counted locally, and never with the password.
func TestRateLimitRedisDownHoldsTheLimitLocally(t *testing.T) {
	cfg, w := watch(Config{PerMinute: 5, Store: StoreRedis, RedisURL: deadRedis(t)})
	l, logs := newLimiter(t, cfg), w.logs
	now := t0.Add(5 * time.Second)
	allowed := 0
	for i := range 30 {
		began := time.Now()
		at := now.Add(time.Duration(i) * time.Second)
		r, err := l.Take(context.Background(), consumerID(1), at)
		if err != nil || !r.Local || r.Limit != 5 {
			t.Fatalf("take %d: %+v, %v; want counted locally against 5", i+1, r, err)
		}
		if r.Allowed {
			allowed++
		} else if want := now.Add(Window).Sub(at); r.RetryAfter != want { // from the first request
			t.Errorf("take %d: RetryAfter %v, want %v (the window's end)", i+1, r.RetryAfter, want)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("take %d took %v, want it bounded by the timeout (%v)", i+1, d, DefaultRedisTimeout)
		}
	}
	if allowed != 5 {
		t.Errorf("%d of 30 allowed with Redis down, want 5", allowed)
	}
	if n := w.local.Load(); n != 30 {
		t.Errorf("CountedLocally called %d times, want 30", n)
	}
	if len(w.degraded) != 1 || !w.degraded[0] {
		t.Errorf("Degraded calls %v, want [true]", w.degraded)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], DegradedMessage) || !strings.Contains(lines[0], `"counted_locally":1`) ||
		!strings.Contains(lines[0], `"store":"redis"`) || !strings.Contains(lines[0], `"local_limit":5`) {
		t.Fatalf("log after 30 requests within a minute:\n%s\nwant one line of the first", logs.String())
	}
	// A minute after the first line, the next one tells how many since.
	if r, err := l.Take(context.Background(), consumerID(1), now.Add(Window)); err != nil || !r.Allowed || !r.Local || r.Remaining != 4 {
		t.Fatalf("the next window: %+v, %v; want a fresh local count", r, err)
	}
	lines = strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"counted_locally":30`) {
		t.Errorf("log a minute later:\n%s\nwant a second line counting 30 (the 29 since and this one)", logs.String())
	}
	if strings.Contains(logs.String(), "s3cret-pw") {
		t.Errorf("the log shows the password:\n%s", logs.String())
	}
}

// A Redis that accepts connections and never answers (frozen, or a
// network dropping packets) holds no request longer than the timeout,
// however many arrive at once: each is counted in this process.
func TestRateLimitRedisFrozenIsBounded(t *testing.T) {
	addr := blackhole(t)
	const timeout = 50 * time.Millisecond
	l := newLimiter(t, Config{PerMinute: 5, Store: StoreRedis, RedisURL: "redis://" + addr + "/0", RedisTimeout: timeout})
	var wg sync.WaitGroup
	var slowest atomic.Int64
	for i := range 50 {
		wg.Go(func() {
			began := time.Now()
			r, err := l.Take(context.Background(), consumerID(i), t0)
			if err != nil || !r.Local || !r.Allowed {
				t.Errorf("Take = %+v, %v; want allowed, counted locally", r, err)
			}
			d := int64(time.Since(began))
			for {
				s := slowest.Load()
				if d <= s || slowest.CompareAndSwap(s, d) {
					break
				}
			}
		})
	}
	wg.Wait()
	// The bound is the timeout; the margin is for a loaded machine (-race).
	if d := time.Duration(slowest.Load()); d > 20*timeout {
		t.Errorf("the slowest of 50 concurrent requests took %v, want it bounded by the timeout (%v)", d, timeout)
	} else {
		t.Logf("the slowest of 50 concurrent requests took %v (timeout %v)", d, timeout)
	}
}

// blackhole listens on a loopback port and accepts connections that it
// never reads from nor answers; they close when the test ends.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A caller that gave up gets its context's error, not a local count: the
// request is over.
func TestRateLimitRedisCallerGaveUp(t *testing.T) {
	l := newLimiter(t, Config{PerMinute: 5, Store: StoreRedis, RedisURL: "redis://" + blackhole(t) + "/0", RedisTimeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Take(ctx, consumerID(1), t0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's deadline as it is", err)
	}
}

// A Redis that refuses the password: counted locally, and the error never
// shows the password, whatever the server answers.
func TestRateLimitRedisWrongPasswordIsNeverShown(t *testing.T) {
	u, err := url.Parse(testdb.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("licensor-nobody", "s3cret-pw")
	logs := &testkit.Buffer{}
	l := newLimiter(t, Config{PerMinute: 5, Store: StoreRedis, RedisURL: u.String(), KeyPrefix: "licensor-test:auth:",
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	if r, err := l.Take(context.Background(), consumerID(1), t0); err != nil || !r.Local {
		t.Errorf("Take = %+v, %v; want counted locally", r, err)
	}
	if !strings.Contains(logs.String(), DegradedMessage) || strings.Contains(logs.String(), "s3cret-pw") {
		t.Errorf("log:\n%s\nwant the line, without the password", logs.String())
	}
	// Should a server ever quote it, it is replaced.
	e := redactedError{errors.New("WRONGPASS s3cret-pw is wrong"), "s3cret-pw"}
	if got := fmt.Sprint(fmt.Errorf("%w: %w", errNotCounted, e)); strings.Contains(got, "s3cret-pw") || !strings.Contains(got, "xxxxx") {
		t.Errorf("redacted: %q", got)
	}
}

// A URL go-redis cannot read stops New, without showing the password.
func TestRateLimitRedisBadURL(t *testing.T) {
	for _, u := range []string{"redis://:s3cret-pw@127.0.0.1:port/0", "http://127.0.0.1:6379", "redis://:s3cret-pw@127.0.0.1:6379/0?pool_size=many"} {
		_, err := New(Config{PerMinute: 5, Store: StoreRedis, RedisURL: u})
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("%q: err = %v, want one without the password", u, err)
		}
	}
	if _, err := New(Config{PerMinute: 5, Store: "cache"}); err == nil {
		t.Error("an unknown store: no error")
	}
}

// go-redis's own lines go to the process's logger at DEBUG, with
// component=redis, not as plain text on stderr.
func TestLogRedisTo(t *testing.T) {
	logs := &testkit.Buffer{}
	LogRedisTo(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { LogRedisTo(slog.New(slog.DiscardHandler)) })
	l := newLimiter(t, Config{PerMinute: 5, Store: StoreRedis, RedisURL: deadRedis(t)})
	if r, err := l.Take(context.Background(), consumerID(1), t0); err != nil || !r.Local {
		t.Fatal(r, err)
	}
	out := logs.String()
	if !strings.Contains(out, `"level":"DEBUG"`) || !strings.Contains(out, `"component":"redis"`) || !strings.Contains(out, "failed to dial") {
		t.Errorf("go-redis's line:\n%s\nwant a JSON DEBUG line with component=redis", out)
	}
}

// With Batch, three replicas counting one consumer's requests in Redis
// hold the limit with one round trip per batch (checkBatch).
func TestRateLimitRedisBatchHoldsTheLimitWithFewerRoundTrips(t *testing.T) {
	_, cfg := redisLimiter(t, batchLimit)
	checkBatch(t, cfg, func(l *Limiter, consumer string) int64 {
		n, err := l.counter.(*batchCounter).store.(*redisCounter).client.HGet(context.Background(), cfg.KeyPrefix+consumer, "h").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// batchLimit is checkBatch's limit.
const batchLimit = 600

// checkBatch holds a store with Batch to its promise: three replicas
// counting one consumer's requests from many goroutines at once never allow
// more than the limit, allow at least the limit less what each replica may
// hold unused (replicas·(Batch−1), here within 5 %), and reach the store
// once per Batch requests: the shared count, read by shared, moves by whole
// batches. One replica alone allows exactly the limit. cfg is the store's
// configuration with PerMinute batchLimit.
func checkBatch(t *testing.T, cfg Config, shared func(l *Limiter, consumer string) int64) {
	t.Helper()
	const limit, replicas, workers, each, batch = batchLimit, 3, 30, 41, 8 // 1230 requests for a limit of 600 (not a whole number of batches)
	cfg.Batch = batch
	var limiters []*Limiter
	for range replicas {
		limiters = append(limiters, newLimiter(t, cfg))
	}
	allowed, refused, missed := takeAcross(t, limiters, workers, each)
	if missed.Load() != 0 {
		t.Errorf("%d requests counted locally", missed.Load())
	}
	if got := allowed.Load(); got > limit || got < limit-replicas*(batch-1) || got < limit*95/100 {
		t.Errorf("%d allowed, want at most %d and at least %d", got, limit, limit-replicas*(batch-1))
	}
	if got := allowed.Load() + refused.Load(); got != workers*each {
		t.Errorf("%d answers, want %d", got, workers*each)
	}
	if n := shared(limiters[0], consumerID(1)); n%batch != 0 || n > workers*each+replicas*batch {
		t.Errorf("the shared count is %d: want whole batches of %d, one round trip each (at most %d)", n, batch, (workers*each)/batch+replicas)
	}

	// One replica alone: exactly the limit, the next window anew.
	alone := newLimiter(t, cfg)
	var ok int
	for range limit + 50 {
		if r := take(t, alone, consumerID(2), t0.Add(time.Second)); r.Allowed {
			ok++
		}
	}
	if ok != limit {
		t.Errorf("one replica allowed %d, want exactly %d", ok, limit)
	}
	if r := take(t, alone, consumerID(2), t0.Add(Window+time.Second)); !r.Allowed || r.Remaining != limit-1 {
		t.Errorf("the next window: %+v, want allowed with %d remaining", r, limit-1)
	}
}

// takeAcross has workers goroutines, released at once, each take each
// requests of consumer 1, spread round the limiters (replicas): how many
// were allowed, refused, and counted locally (a count past its timeout on a
// loaded machine: counted in allowed or refused too).
func takeAcross(t *testing.T, limiters []*Limiter, workers, each int) (allowed, refused, missed *atomic.Int64) {
	t.Helper()
	allowed, refused, missed = new(atomic.Int64), new(atomic.Int64), new(atomic.Int64)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range each {
				r, err := limiters[(w+i)%len(limiters)].Take(context.Background(), consumerID(1), t0.Add(time.Second))
				if r.Local {
					missed.Add(1)
				}
				switch {
				case err != nil:
					t.Error(err)
					return
				case r.Allowed:
					allowed.Add(1)
				default:
					refused.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return allowed, refused, missed
}
