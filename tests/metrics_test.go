package tests

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/tests/testdb"
)

// metric returns the line of a sample ("name{labels} value") or "".
func (a *app) metric(sample string) string {
	a.t.Helper()
	body := a.do(http.MethodGet, "/metrics", "").wantStatus(http.StatusOK).Body.String()
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, sample+" ") {
			return line
		}
	}
	return ""
}

func TestMetricsFamiliesExistFromStartUp(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	for _, sample := range []string{
		`licensor_idempotency_requests_total{operation="licenses.store",outcome="executed"}`,
		`licensor_idempotency_requests_total{operation="licenses.store",outcome="taken_over"}`,
		`licensor_idempotency_requests_total{operation="licenses.store",outcome="discarded"}`,
		`licensor_idempotency_pending`,
		`licensor_idempotency_oldest_pending_seconds`,
		`licensor_vendor_requests_total{call="create",status="201"}`,
		`licensor_vendor_retries_total`,
		`licensor_reconcile_total{result="failed"}`,
		`licensor_prune_deleted_total`,
	} {
		if got := a.metric(sample); got != sample+" 0" {
			t.Errorf("%s: got %q, want it at 0", sample, got)
		}
	}
	for _, c := range vendorproto.Calls { // every call of the vendor protocol, at its success
		sample := `licensor_vendor_requests_total{call="` + c.Name + `",status="` + strconv.Itoa(c.OK) + `"}`
		if got := a.metric(sample); got != sample+" 0" {
			t.Errorf("%s: got %q, want it at 0", sample, got)
		}
	}
	for _, kind := range licenses.DriftKinds { // every kind the drift check reports
		sample := `licensor_drift_mismatches{kind="` + kind + `"}`
		if got := a.metric(sample); got != sample+" 0" {
			t.Errorf("%s: got %q, want it at 0", sample, got)
		}
	}
	body := a.do(http.MethodGet, "/metrics", "").Body.String()
	for _, family := range []string{"licensor_http_requests_total", "licensor_http_request_duration_seconds"} {
		if !strings.Contains(body, "# TYPE "+family) {
			t.Errorf("family %s is missing", family)
		}
	}
}

func TestMetricsCount(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "m-1")
		a.vendor.script("GET", reply{status: 429, body: `{}`, header: map[string]string{"Retry-After": "1"}})
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		a.vendor.script("POST", reply{status: 500, body: `{}`})
		a.do(http.MethodPost, "/api/licenses", `{"name":"B","domain":"b.test"}`, keyed(a.consumer("acme"), "m-2")...).wantStatus(http.StatusAccepted)

		want := map[string]string{
			`licensor_idempotency_requests_total{operation="licenses.store",outcome="executed"}`: "1",
			`licensor_idempotency_requests_total{operation="licenses.store",outcome="replayed"}`: "1",
			`licensor_idempotency_requests_total{operation="licenses.store",outcome="pending"}`:  "1",
			`licensor_http_requests_total{method="POST",route="/api/licenses",status="201"}`:     "2",
			`licensor_vendor_requests_total{call="list",status="429"}`:                           "1",
			`licensor_vendor_requests_total{call="create",status="500"}`:                         "1",
			`licensor_vendor_retries_total`:                                                      "1",
			`licensor_idempotency_pending`:                                                       "1",
		}
		for sample, v := range want {
			if got := a.metric(sample); got != sample+" "+v {
				t.Errorf("got %q, want %s", got, v)
			}
		}
		if got := a.metric("licensor_idempotency_oldest_pending_seconds"); got == "" || strings.HasSuffix(got, " 0") {
			t.Errorf("oldest pending age = %q, want above 0", got)
		}
	})
}

// seriesCount is how many samples the server's /metrics exposes.
func (a *app) seriesCount() int {
	a.t.Helper()
	body := a.do(http.MethodGet, "/metrics", "").wantStatus(http.StatusOK).Body.String()
	n := 0
	for _, line := range strings.Split(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") {
			n++
		}
	}
	return n
}

// Labels are bounded by construction: a client sending random methods and
// paths cannot grow the number of series (nor the memory behind them).
func TestMetricsSeriesDoNotGrowWithClientInput(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('A' + rnd.IntN(26))
		}
		return string(b)
	}
	send := func() {
		for range 500 {
			a.do(word(8+rnd.IntN(40)), "/"+word(10)+"/"+word(12), "")
			a.do(word(8+rnd.IntN(40)), "/api/licenses", "")
		}
	}
	send()          // the first round makes the series it can (OTHER on each route, unmatched)
	a.seriesCount() // and the scrape its own
	before := a.seriesCount()
	send()
	if after := a.seriesCount(); after != before {
		t.Errorf("series grew from %d to %d with 1,000 more random methods and paths", before, after)
	}
	if got := a.metric(`licensor_http_requests_total{method="OTHER",route="unmatched",status="404"}`); got == "" {
		t.Error("random methods on unknown paths are not counted as OTHER, unmatched")
	}
}
