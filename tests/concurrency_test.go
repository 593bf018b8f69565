package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// answer is what one request over the wire was answered: its status (0:
// none came), its error code (if any), its Retry-After and
// Idempotent-Replayed, and the key it was sent with.
type answer struct {
	key, code, retryAfter, replayed string
	status                          int
}

// ask makes one request to srv over real HTTP (send: through the contract
// client, which checks the answer against the contract).
func ask(srv *httptest.Server, method, path, token, key, body string) answer {
	status, h, raw := send(srv.URL+path, method, token, key, body)
	a := answer{key: key, status: status, retryAfter: h.Get("Retry-After"), replayed: h.Get("Idempotent-Replayed")}
	if _, rest, ok := strings.Cut(raw, `"code":"`); ok {
		a.code, _, _ = strings.Cut(rest, `"`)
	}
	return a
}

// tableRows counts the rows of a table.
func (a *app) tableRows(table string) int64 {
	a.t.Helper()
	var n int64
	if err := a.db.Gorm.Table(table).Count(&n).Error; err != nil {
		a.t.Fatal(err)
	}
	return n
}

// One consumer fires 40 creates at once while the vendor holds every create
// it receives: 20 are in flight (CONSUMER_CONCURRENCY), the other 20 are
// refused at once with 429 concurrency_limited and leave nothing behind (no
// idempotency record, no license, no event, no vendor call). Meanwhile the
// consumer's reads are served, its other writes refused (through any of its
// tokens), and another
// consumer's create is served while the 20 are still held. Released, the 20
// complete, and a refused request sent again is executed afresh.
func TestConsumerConcurrencyBoundsWritesInFlight(t *testing.T) {
	const limit, burst = 20, 40
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withConfig(func(c *config.Config) {
			c.ConsumerConcurrency = limit
			c.Vendor.Timeout = time.Minute // the held creates wait for the test, not for the driver
		}))
		srv := httptest.NewServer(a.e)
		defer srv.Close()
		hold := make(chan struct{})
		released := false
		defer func() { // before srv.Close, which waits for the held requests
			if !released {
				close(hold)
			}
		}()
		held := make([]reply, limit) // the held creates: one for each that may be in flight
		for i := range held {
			held[i] = reply{hold: hold} // released: answered as the real vendor does
		}
		a.vendor.script(http.MethodPost, held...)
		acme := a.token("acme", auth.LicensesRead, auth.LicensesWrite)
		zeta := a.token("zeta", auth.LicensesRead, auth.LicensesWrite)

		answers := make(chan answer, burst)
		for i := range burst {
			go func() {
				body := fmt.Sprintf(`{"name":"Acme %d","domain":"burst-%d.test"}`, i, i)
				answers <- ask(srv, http.MethodPost, "/api/licenses", acme, fmt.Sprintf("burst-%d", i), body)
			}()
		}

		// The refusals come back while the others are held.
		refused := collect(t, answers, burst-limit, 30*time.Second)
		for _, r := range refused {
			if r.status != http.StatusTooManyRequests || r.code != "concurrency_limited" || r.retryAfter != "1" {
				t.Fatalf("%s: %d %q Retry-After %q, want 429 concurrency_limited with Retry-After 1",
					r.key, r.status, r.code, r.retryAfter)
			}
		}
		testkit.Eventually(t, 10*time.Second, func() bool { return a.vendor.count(http.MethodPost) == limit },
			"%d creates at the vendor, want %d", a.vendor.count(http.MethodPost), limit)
		for _, r := range refused {
			if rec := a.record(r.key); rec != nil {
				t.Errorf("%s was refused, yet its idempotency record was kept (%s)", r.key, rec.Status)
			}
		}
		if n := a.tableRows("idempotency_keys"); n != limit {
			t.Errorf("%d idempotency records while %d are in flight, want %d", n, limit, limit)
		}

		// Reads are not limited; the consumer's other writes are.
		if r := ask(srv, http.MethodGet, "/api/licenses", acme, "", ""); r.status != http.StatusOK {
			t.Errorf("a read while %d writes are in flight: %d %q, want 200", limit, r.status, r.code)
		}
		hooks := a.token("acme", auth.WebhooksManage) // another of acme's tokens: the bound is the consumer's
		endpoint := ask(srv, http.MethodPost, "/api/webhook-endpoints", hooks, "", `{"url":"https://shop.example/hooks"}`)
		if endpoint.status != http.StatusTooManyRequests || endpoint.code != "concurrency_limited" || a.tableRows("webhook_endpoints") != 0 {
			t.Errorf("a webhook endpoint while %d writes are in flight: %d %q, %d rows, want 429 concurrency_limited and none",
				limit, endpoint.status, endpoint.code, a.tableRows("webhook_endpoints"))
		}
		revoke := ask(srv, http.MethodDelete, "/api/licenses/"+ulid.Make().String(), acme, "revoke-1", "")
		if revoke.status != http.StatusTooManyRequests || revoke.code != "concurrency_limited" {
			t.Errorf("a revoke while %d writes are in flight: %d %q, want 429 concurrency_limited", limit, revoke.status, revoke.code)
		}

		// Another consumer is served at once, while acme's 20 are held.
		if r := ask(srv, http.MethodPost, "/api/licenses", zeta, "zeta-1", `{"name":"Zeta","domain":"zeta.test"}`); r.status != http.StatusCreated {
			t.Fatalf("zeta's create while acme's are held: %d %q, want 201", r.status, r.code)
		}
		if got, want := a.metric("licensor_concurrency_limited_total"), fmt.Sprintf("licensor_concurrency_limited_total %d", burst-limit+2); got != want {
			t.Errorf("metric: %q, want %q", got, want)
		}

		close(hold)
		released = true
		for _, r := range collect(t, answers, limit, 30*time.Second) {
			if r.status != http.StatusCreated {
				t.Errorf("%s, released: %d %q, want 201", r.key, r.status, r.code)
			}
		}
		a.wantVendorCalls(http.MethodPost, limit+1) // acme's 20 and zeta's one: no refused create reached it
		if got := a.licenseRows(); got != limit+1 {
			t.Errorf("%d licenses, want %d", got, limit+1)
		}
		for _, table := range []string{"idempotency_keys", "consumer_events"} {
			if got := a.tableRows(table); got != limit+1 {
				t.Errorf("%d rows in %s, want %d: one for each create served, none for a refusal", got, table, limit+1)
			}
		}

		// A refused request sent again is a new create, not a replay.
		r := refused[0]
		i := strings.TrimPrefix(r.key, "burst-")
		again := ask(srv, http.MethodPost, "/api/licenses", acme, r.key, fmt.Sprintf(`{"name":"Acme %s","domain":"burst-%s.test"}`, i, i))
		if again.status != http.StatusCreated || again.replayed != "" {
			t.Errorf("%s sent again: %d replayed %q, want a fresh 201", r.key, again.status, again.replayed)
		}
	})
}

// collect receives n answers, failing the test if they do not all come
// within the deadline.
func collect(t *testing.T, answers <-chan answer, n int, within time.Duration) []answer {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	got := make([]answer, 0, n)
	for len(got) < n {
		select {
		case r := <-answers:
			got = append(got, r)
		case <-deadline.C:
			t.Fatalf("%d of %d answers within %s", len(got), n, within)
		}
	}
	return got
}
