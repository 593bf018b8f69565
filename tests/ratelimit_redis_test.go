package tests

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/ratelimit"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// redisLimited counts RATE_LIMIT_PER_MINUTE in the Redis at redisURL
// (RATE_LIMIT_STORE=redis).
func redisLimited(perMinute int, redisURL string) option {
	return withConfig(func(c *config.Config) {
		c.RateLimitPerMinute, c.RateLimitStore, c.RedisURL = perMinute, config.RateLimitRedis, redisURL
	})
}

// deleteConsumersRedisKeys deletes, when the test ends, the Redis keys of
// every consumer the test's database then holds: consumer ids are ULIDs,
// so no two tests share a key.
func deleteConsumersRedisKeys(t *testing.T, db *testdb.DB, redisURL string) {
	t.Cleanup(func() {
		var ids []string
		if err := db.Gorm.Table("consumers").Pluck("id", &ids).Error; err != nil {
			t.Errorf("consumers: %v", err)
			return
		}
		for _, id := range ids {
			testdb.DeleteRedisKeysNow(t, redisURL, ratelimit.DefaultKeyPrefix+id)
		}
	})
}

// With RATE_LIMIT_STORE=redis, two replicas share each consumer's count
// on either database, SQLite included (where the default, memory, counts
// apart), with the headers and the 429 of every store.
func TestRateLimitRedisSharedByReplicas(t *testing.T) {
	redisURL := testdb.RedisURL(t)
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		deleteConsumersRedisKeys(t, db, redisURL)
		clk := windowClock(0)
		one := newApp(t, db, redisLimited(4, redisURL), withClock(clk))
		two := newApp(t, db, redisLimited(4, redisURL), withClock(clk))
		acme := one.consumer("acme")
		wantSharedCount(clk, acme, 4, one, two)
		two.do(http.MethodGet, "/api/licenses", "", two.consumer("globex")...).wantStatus(http.StatusOK).wantRateHeaders(4, 3)
		clk.Advance(time.Minute)
		one.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(4, 3)
		var rows int64
		if err := db.Gorm.Table("rate_limits").Count(&rows).Error; err != nil || rows != 0 {
			t.Errorf("rate_limits rows = %d (%v), want none: Redis counts", rows, err)
		}
	})
}

// A configuration that names a Redis and no store counts in that Redis
// (the default once REDIS_URL is set, as config.Load gives it): a
// hand-made one, completed by the bootstrap, is shared by two replicas on
// SQLite, where the store would otherwise be each process's memory.
func TestRateLimitDefaultsToTheRedisNamed(t *testing.T) {
	redisURL := testdb.RedisURL(t)
	db := testdb.New(t, "sqlite")
	deleteConsumersRedisKeys(t, db, redisURL)
	redisOnly := withConfig(func(c *config.Config) { c.RateLimitPerMinute, c.RateLimitStore, c.RedisURL = 2, "", redisURL })
	clk := windowClock(0)
	one := newApp(t, db, redisOnly, withClock(clk))
	two := newApp(t, db, redisOnly, withClock(clk))
	wantSharedCount(clk, one.consumer("acme"), 2, one, two)
}

// limitedBurst sends n GET /api/licenses of consumer to a, a second apart
// on clk, and checks each answer against a limit of limit counted from
// zero: the first limit served with the headers counting down, every one
// after them the 429 with Retry-After, to a minute after the first request. Each answer must come within 2 s
// (the limiter's timeout, with a margin for a loaded machine).
func limitedBurst(t *testing.T, a *app, clk *testkit.Clock, consumer []string, limit, n int) {
	t.Helper()
	end := clk.Now().Truncate(time.Second).Add(time.Minute) // the window's, from the first request
	for i := range n {
		began := time.Now()
		r := a.do(http.MethodGet, "/api/licenses", "", consumer...)
		if i < limit {
			r.wantStatus(http.StatusOK).wantRateHeaders(limit, limit-1-i)
		} else {
			retryAfter := int(end.Sub(clk.Now()) / time.Second)
			r.wantLimited(limit, retryAfter, clk.Now())
		}
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("request %d took %v, want it bounded by the limiter's timeout", i+1, d)
		}
		clk.Advance(time.Second)
	}
}

// wantDegraded checks the rate limit's metrics: the requests counted
// locally so far, and whether the replica counts alone.
func wantDegraded(t *testing.T, a *app, local int, degraded bool) {
	t.Helper()
	if got := metricSample(t, a, "licensor_ratelimit_local_total"); got != strconv.Itoa(local) {
		t.Errorf("licensor_ratelimit_local_total = %q, want %d", got, local)
	}
	want := "0"
	if degraded {
		want = "1"
	}
	if got := metricSample(t, a, "licensor_ratelimit_degraded"); got != want {
		t.Errorf("licensor_ratelimit_degraded = %q, want %s", got, want)
	}
}

// wantLines fails unless the app logged msg n times.
func wantLines(t *testing.T, a *app, msg string, n int) {
	t.Helper()
	if got := strings.Count(a.logs.String(), msg); got != n {
		t.Errorf("%d lines %q, want %d:\n%s", got, msg, n, a.logs.String())
	}
}

// Redis stopped (nothing listens where REDIS_URL points): of 20 requests
// within a minute at a limit of 5, the replica serves 5 and refuses 15,
// with the headers and the 429 of every store, counts them in
// licensor_ratelimit_local_total, and logs the outage once, not 20 times.
// (They were all served without a limit before: the limit now degrades to
// the replica's share, it never lifts.)
func TestRateLimitRedisStoppedHoldsTheLimitLocally(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := windowClock(10 * time.Second)
		a := newApp(t, db, redisLimited(5, "redis://"+testkit.FreeAddr(t)+"/0"), withClock(clk))
		wantDegraded(t, a, 0, false)
		limitedBurst(t, a, clk, a.consumer("acme"), 5, 20)
		wantDegraded(t, a, 20, true)
		wantLines(t, a, ratelimit.DegradedMessage, 1)
		// Another consumer has its own local count.
		a.do(http.MethodGet, "/api/licenses", "", a.consumer("globex")...).wantStatus(http.StatusOK).wantRateHeaders(5, 4)
	})
}

// Redis slowed past REDIS_TIMEOUT (a proxy that holds every chunk ten
// timeouts long): the limit is held locally all the same, each request
// bounded by the timeout. Back at full speed, the replicas share Redis's
// count again.
func TestRateLimitRedisSlowHoldsTheLimitLocally(t *testing.T) {
	redisURL := testdb.RedisURL(t)
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		deleteConsumersRedisKeys(t, db, redisURL)
		p, viaProxy := redisProxy(t, redisURL)
		const timeout = 50 * time.Millisecond
		slowRedis := withConfig(func(c *config.Config) { c.RedisTimeout = timeout })
		clk := windowClock(0)
		a := newApp(t, db, redisLimited(3, viaProxy), slowRedis, withClock(clk))
		b := newApp(t, db, redisLimited(3, redisURL), withClock(clk)) // another replica, on Redis itself
		acme := a.consumer("acme")
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(3, 2)

		p.Slow(10 * timeout)
		limitedBurst(t, a, clk, acme, 3, 8)
		wantDegraded(t, a, 8, true)
		wantLines(t, a, ratelimit.DegradedMessage, 1)

		// At full speed: counted in Redis, shared with the other replica.
		// (A consumer of its own: the slowed counts may still reach
		// acme's key late, which only errs on the strict side.)
		p.Restore()
		globex := a.consumer("globex")
		a.do(http.MethodGet, "/api/licenses", "", globex...).wantStatus(http.StatusOK).wantRateHeaders(3, 2)
		b.do(http.MethodGet, "/api/licenses", "", globex...).wantStatus(http.StatusOK).wantRateHeaders(3, 1)
		wantDegraded(t, a, 8, false)
		wantLines(t, a, ratelimit.RecoveredMessage, 1)
	})
}

// Redis down (every connection cut) and back: the replica counts alone
// while it is down, and once Redis answers the count is Redis's again,
// where it stopped, not the local one. The log says each change once.
func TestRateLimitRedisRecovers(t *testing.T) {
	redisURL := testdb.RedisURL(t)
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		deleteConsumersRedisKeys(t, db, redisURL)
		p, viaProxy := redisProxy(t, redisURL)
		clk := windowClock(0)
		a := newApp(t, db, redisLimited(5, viaProxy), withClock(clk))
		acme := a.consumer("acme")
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(5, 4)

		p.Cut()
		limitedBurst(t, a, clk, acme, 5, 10) // the local count starts from 0: 5 served, 5 refused
		wantDegraded(t, a, 10, true)

		p.Restore()
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(5, 3)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(5, 2)
		wantDegraded(t, a, 10, false)
		wantLines(t, a, ratelimit.DegradedMessage, 1)
		wantLines(t, a, ratelimit.RecoveredMessage, 1)
		if !strings.Contains(a.logs.String(), `"counted_locally":9`) {
			t.Errorf("log:\n%s\nwant the line back to count the 9 counted locally since the first line", a.logs.String())
		}
	})
}

// metricSample is the value of one sample of the app's /metrics.
func metricSample(t *testing.T, a *app, name string) string {
	t.Helper()
	body := a.do(http.MethodGet, "/metrics", "").wantStatus(http.StatusOK).Body.String()
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// redisProxy puts a proxy the test can slow or cut in front of the Redis at
// redisURL; it returns the proxy and the URL that reaches Redis through it.
func redisProxy(t *testing.T, redisURL string) (*proxy, string) {
	t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	via := *u
	via.Host = p.Addr()
	return p, via.String()
}
