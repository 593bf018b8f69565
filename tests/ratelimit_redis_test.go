package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/ratelimit"
	"github.com/licensor-api/licensor/config"
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
			testdb.DeleteRedisKeysNow(t, redisURL, ratelimit.DefaultKeyPrefix+id+":*")
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
		one.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(4, 3)
		two.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(4, 2)
		one.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(4, 1)
		two.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(4, 0)
		one.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(4, 60, clk.Now())
		two.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(4, 60, clk.Now())
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
	acme := one.consumer("acme")
	one.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(2, 1)
	two.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(2, 0)
	one.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(2, 60, clk.Now())
}

// Redis down: every request is served, without a limit and without the
// rate limit headers (the limiter fails open), at once; each is counted in
// licensor_ratelimit_not_counted_total and the outage is logged once a
// minute, with the count. When Redis is back, counting goes on where it
// stopped.
func TestRateLimitRedisDownFailsOpen(t *testing.T) {
	redisURL := testdb.RedisURL(t)
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.New(t, "sqlite")
	deleteConsumersRedisKeys(t, db, redisURL)
	p := newProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = p.Addr()
	clk := windowClock(0)
	a := newApp(t, db, redisLimited(3, viaProxy.String()), withClock(clk))
	acme := a.consumer("acme")
	a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(3, 2)

	p.Cut()
	for i := range 10 {
		began := time.Now()
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantNoRateHeaders()
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("request %d with Redis down took %v, want it bounded by the limiter's timeout (%v)", i+1, d, ratelimit.DefaultRedisTimeout)
		}
		clk.Advance(time.Second)
	}
	if got := metricSample(t, a, "licensor_ratelimit_not_counted_total"); got != "10" {
		t.Errorf("licensor_ratelimit_not_counted_total = %q, want 10", got)
	}
	if n := strings.Count(a.logs.String(), ratelimit.MissedMessage); n != 1 {
		t.Errorf("%d lines %q for 10 requests within a minute, want 1:\n%s", n, ratelimit.MissedMessage, a.logs.String())
	}

	// Back: counted again, the window's count where it stopped.
	p.Restore()
	a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(3, 1)

	// A frozen Redis (the sockets open, no answer) holds a request no
	// longer than the timeout either; a minute after the first line, it
	// is told again.
	clk.Advance(time.Minute)
	p.Freeze()
	began := time.Now()
	a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantNoRateHeaders()
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("a request with Redis frozen took %v, want it bounded by the limiter's timeout (%v)", d, ratelimit.DefaultRedisTimeout)
	}
	if n := strings.Count(a.logs.String(), ratelimit.MissedMessage); n != 2 || !strings.Contains(a.logs.String(), `"not_counted":10,`) {
		t.Errorf("%d lines %q, want a second one counting the 9 since the first and the frozen request:\n%s", n, ratelimit.MissedMessage, a.logs.String())
	}
	p.Restore()
	clk.Advance(time.Minute)
	a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(3, 2)
	if got := metricSample(t, a, "licensor_ratelimit_not_counted_total"); got != "11" {
		t.Errorf("licensor_ratelimit_not_counted_total = %q, want 11", got)
	}
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
