package tests

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/ratelimit"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// rateLimited sets RATE_LIMIT_PER_MINUTE.
func rateLimited(perMinute int) option {
	return withConfig(func(c *config.Config) { c.RateLimitPerMinute = perMinute })
}

// windowClock is a clock at offset into the current minute, so that tests
// know how long the window has left.
func windowClock(offset time.Duration) *testkit.Clock {
	return testkit.NewClock(time.Now().UTC().Truncate(time.Minute).Add(offset))
}

// wantRateHeaders fails unless the response carries the limit and the
// remaining count.
func (r *response) wantRateHeaders(limit, remaining int) *response {
	r.t.Helper()
	if got := exactHeader(r.Header(), "X-RateLimit-Limit"); got != strconv.Itoa(limit) {
		r.t.Errorf("X-RateLimit-Limit = %q, want %d (status %d)", got, limit, r.Code)
	}
	if got := exactHeader(r.Header(), "X-RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		r.t.Errorf("X-RateLimit-Remaining = %q, want %d (status %d)", got, remaining, r.Code)
	}
	return r
}

// wantNoRateHeaders fails if the response carries any rate limit header.
func (r *response) wantNoRateHeaders() *response {
	r.t.Helper()
	for name := range r.Header() {
		if strings.HasPrefix(strings.ToLower(name), "x-ratelimit") || name == "Retry-After" {
			r.t.Errorf("unexpected header %s: %q (status %d)", name, r.Header().Get(name), r.Code)
		}
	}
	return r
}

// wantLimited asserts the 429: its body, Retry-After, and the headers.
func (r *response) wantLimited(limit int, retryAfter int, now time.Time) {
	r.t.Helper()
	m := r.wantError(http.StatusTooManyRequests, "rate_limited")
	if m["message"] != "Too Many Attempts." {
		r.t.Errorf("message = %v", m["message"])
	}
	if got := r.Header().Get("Retry-After"); got != strconv.Itoa(retryAfter) {
		r.t.Errorf("Retry-After = %q, want %d", got, retryAfter)
	}
	if got, want := exactHeader(r.Header(), "X-RateLimit-Reset"), strconv.FormatInt(now.Unix()+int64(retryAfter), 10); got != want {
		r.t.Errorf("X-RateLimit-Reset = %q, want %s", got, want)
	}
	r.wantRateHeaders(limit, 0)
}

// A burst past the limit: every answer counts down, the one over it is the
// 429 until the window ends, a minute after the first request (the window
// rule changed from the clock minute: Retry-After was 40, then 10), and
// another consumer has its own count.
func TestRateLimitBurst(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := windowClock(20 * time.Second)
		a := newApp(t, db, rateLimited(5), withClock(clk))
		acme := a.consumer("acme")
		for i := range 5 {
			a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(5, 4-i)
		}
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(5, 60, clk.Now())
		clk.Advance(30 * time.Second)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(5, 30, clk.Now())
		a.do(http.MethodGet, "/api/licenses", "", a.consumer("globex")...).wantStatus(http.StatusOK).wantRateHeaders(5, 4)
		// A second token of the same consumer shares its count.
		a.do(http.MethodGet, "/api/licenses", "", a.consumer("acme")...).wantLimited(5, 30, clk.Now())
		// Nothing of the refused requests reached the handlers or the vendor.
		a.wantVendorCalls("", 0)
	})
}

// Errors after authentication carry the headers and count; a 401 does
// neither.
func TestRateLimitHeadersOnEveryAuthenticatedAnswer(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, rateLimited(5), withClock(windowClock(0)))
		reader := bearer(a.token("acme", auth.LicensesRead))
		a.do(http.MethodGet, "/api/licenses/01J00000000000000000000000", "", reader...).wantStatus(http.StatusNotFound).wantRateHeaders(5, 4)
		a.do(http.MethodPost, "/api/licenses", acmeBody, reader...).wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodPost, "/api/licenses", acmeBody, reader...).wantRateHeaders(5, 2)
		for _, h := range [][]string{nil, bearer("not-a-token"), {"Authorization", "Basic eDp5"}} {
			a.do(http.MethodGet, "/api/licenses", "", h...).wantStatus(http.StatusUnauthorized).wantNoRateHeaders()
		}
		a.do(http.MethodGet, "/api/licenses", "", reader...).wantStatus(http.StatusOK).wantRateHeaders(5, 1)
		writer := bearer(a.token("acme", auth.LicensesWrite))
		a.do(http.MethodPost, "/api/licenses", `{"name":""}`, writer...).wantStatus(http.StatusUnprocessableEntity).wantRateHeaders(5, 0)
	})
}

// A replay is a request like any other: it counts, and over the limit it
// is refused rather than replayed.
func TestRateLimitCountsReplays(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := windowClock(0)
		a := newApp(t, db, rateLimited(3), withClock(clk))
		acme := keyed(a.consumer("acme"), "order-1")
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).wantRateHeaders(3, 2)
		for remaining := 1; remaining >= 0; remaining-- {
			r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).wantRateHeaders(3, remaining)
			if r.Header().Get("Idempotent-Replayed") != "true" {
				t.Error("not a replay")
			}
		}
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantLimited(3, 60, clk.Now())
		a.wantVendorCalls("POST", 1)
	})
}

// The count starts again 60 s after the consumer's first request, not at
// the next clock minute: Laravel's ThrottleRequests calls RateLimiter::hit
// with a decay of 60 s, which starts the window's timer at the first hit
// (cache add of key:timer = now + 60), and answers a 429 with Retry-After =
// the timer less now and X-RateLimit-Reset = the timer, in whole seconds.
// First requests at :50 of a minute: the clock minute turning at :60 opens
// nothing (with clock-minute windows it let two more through at once), the
// window ends at :110.
func TestRateLimitWindowResets(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := windowClock(50 * time.Second)
		end := clk.Now().Add(time.Minute).Unix()
		a := newApp(t, db, rateLimited(2), withClock(clk))
		acme := a.consumer("acme")
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(2, 1)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(2, 0)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(2, 60, clk.Now())
		clk.Advance(9*time.Second + 500*time.Millisecond)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(2, 51, clk.Now()) // half a second rounds up
		clk.Advance(500 * time.Millisecond)                                              // the clock minute turns
		r := a.do(http.MethodGet, "/api/licenses", "", acme...)
		r.wantLimited(2, 50, clk.Now())
		if got := exactHeader(r.Header(), "X-RateLimit-Reset"); got != strconv.FormatInt(end, 10) {
			t.Errorf("X-RateLimit-Reset = %s, want the window's end %d", got, end)
		}
		clk.Advance(49*time.Second + 500*time.Millisecond)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(2, 1, clk.Now())
		clk.Advance(500 * time.Millisecond) // 60 s after the first request
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(2, 1)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(2, 0)
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantLimited(2, 60, clk.Now())
	})
}

// RATE_LIMIT_PER_MINUTE=0 turns the limiter off: no limit, and no headers,
// as Laravel sends none on a route without a limiter.
func TestRateLimitOff(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, rateLimited(0))
		acme := a.consumer("acme")
		for range 20 {
			a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantNoRateHeaders()
		}
		if rows := a.tableRows("rate_limits"); rows != 0 {
			t.Errorf("rate_limits rows = %d, want none", rows)
		}
	})
}

// Two replicas on one MySQL database share each consumer's count. On
// SQLite, one process serves the database and counts in memory: two apps
// in one test count apart, which is what the docs say.
func TestRateLimitSharedByReplicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := windowClock(0)
		one := newApp(t, db, rateLimited(4), withClock(clk))
		two := newApp(t, db, rateLimited(4), withClock(clk))
		acme := one.consumer("acme")
		if db.Dialect != "mysql" {
			one.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(4, 3)
			two.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(4, 3)
			one.do(http.MethodGet, "/api/licenses", "", acme...).wantRateHeaders(4, 2)
			return
		}
		wantSharedCount(clk, acme, 4, one, two)
		globex := two.consumer("globex")
		one.do(http.MethodGet, "/api/licenses", "", globex...).wantStatus(http.StatusOK).wantRateHeaders(4, 3)
	})
}

// wantSharedCount sends consumer's requests to the replicas in turn: they
// count the limit down between them, and then each refuses the next.
func wantSharedCount(clk *testkit.Clock, consumer []string, limit int, replicas ...*app) {
	for i := range limit {
		replicas[i%len(replicas)].do(http.MethodGet, "/api/licenses", "", consumer...).wantRateHeaders(limit, limit-1-i)
	}
	for _, r := range replicas {
		r.do(http.MethodGet, "/api/licenses", "", consumer...).wantLimited(limit, 60, clk.Now())
	}
}

// When the database store's write fails and the database still serves the
// request (here its table is gone), the replica counts alone: of 8 requests
// at a limit of 3, 3 are served and 5 refused, with the headers and the
// 429, and the outage is logged once. When the table is back, the count is
// the table's again. On SQLite and MariaDB (RATE_LIMIT_STORE=database).
// (The requests were served without a limit before: the limit now degrades
// to the replica's share, it never lifts.)
func TestRateLimitDatabaseFailingHoldsTheLimitLocally(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		inTheDatabase := withConfig(func(c *config.Config) { c.RateLimitPerMinute, c.RateLimitStore = 3, config.RateLimitDatabase })
		clk := windowClock(0)
		a := newApp(t, db, inTheDatabase, withClock(clk))
		acme := a.consumer("acme")
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(3, 2)
		if err := db.Gorm.Exec("ALTER TABLE rate_limits RENAME TO rate_limits_away").Error; err != nil {
			t.Fatal(err)
		}
		limitedBurst(t, a, clk, acme, 3, 8)
		wantDegraded(t, a, 8, true)
		wantLines(t, a, ratelimit.DegradedMessage, 1)

		if err := db.Gorm.Exec("ALTER TABLE rate_limits_away RENAME TO rate_limits").Error; err != nil {
			t.Fatal(err)
		}
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).wantRateHeaders(3, 1)
		wantDegraded(t, a, 8, false)
		wantLines(t, a, ratelimit.RecoveredMessage, 1)
	})
}

// exactHeader is the value of header name under exactly that spelling (the
// rate limit headers are sent as Laravel spells them, which is not Go's
// canonical form, so http.Header.Get does not find them).
func exactHeader(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
