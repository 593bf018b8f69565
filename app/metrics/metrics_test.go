package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/metrics"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// scrape returns the Prometheus text the handler serves.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d", rec.Code)
	}
	return rec.Body.String()
}

// sample returns the value of a sample ("name{labels}"), or "" when absent.
func sample(body, name string) string {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// wantSamples checks the value of each sample in body; when says what the
// scrape was of, in the error.
func wantSamples(t *testing.T, body, when string, want map[string]string) {
	t.Helper()
	for s, v := range want {
		if got := sample(body, s); got != v {
			t.Errorf("%s = %q%s, want %s", s, got, when, v)
		}
	}
}

// zeros is each of names at "0".
func zeros(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = "0"
	}
	return m
}

func TestFamiliesExistFromStartUp(t *testing.T) {
	m := metrics.New([]string{"licenses.store"}, nil)
	for _, c := range vendorproto.Calls {
		m.DeclareVendorCall(c.Name, c.OK)
	}
	body := scrape(t, m)
	wantSamples(t, body, "", zeros(
		`licensor_idempotency_requests_total{operation="licenses.store",outcome="executed"}`,
		`licensor_idempotency_requests_total{operation="licenses.store",outcome="taken_over"}`,
		`licensor_idempotency_pending`,
		`licensor_idempotency_oldest_pending_seconds`,
		`licensor_vendor_requests_total{call="list",status="200"}`,
		`licensor_vendor_requests_total{call="create",status="201"}`,
		`licensor_vendor_requests_total{call="delete",status="204"}`,
		`licensor_vendor_requests_total{call="rotate",status="200"}`,
		`licensor_vendor_retries_total`,
		`licensor_reconcile_total{result="completed"}`,
		`licensor_reconcile_total{result="failed"}`,
		`licensor_prune_deleted_total`,
		`licensor_ratelimit_local_total`,
		`licensor_ratelimit_degraded`,
	))
	// The HTTP families have no known label values: they show from the first request.
	for _, family := range []string{"go_goroutines", "process_start_time_seconds"} {
		if !strings.Contains(body, "# TYPE "+family+" ") {
			t.Errorf("family %s is missing", family)
		}
	}
}

func TestObserveCounts(t *testing.T) {
	m := metrics.New([]string{"licenses.store"}, nil)
	m.ObserveHTTP("/api/licenses/:id", http.MethodGet, http.StatusOK, 30*time.Millisecond)
	m.ObserveHTTP("/api/licenses/:id", http.MethodGet, http.StatusOK, time.Millisecond)
	m.ObserveHTTP("", http.MethodGet, http.StatusNotFound, time.Millisecond)
	m.ObserveIdempotency("licenses.store", "replayed")
	m.ObserveVendor("create", 0)
	m.ObserveVendor("list", http.StatusTooManyRequests)
	m.ObserveVendorRetry("list")
	m.ObserveVendorRetry("create")
	m.ObserveReconcile("waiting")
	m.ObservePruned(7)
	m.ObservePruned(0)
	m.ObserveRateLimitLocal()
	m.ObserveRateLimitLocal()
	m.SetRateLimitDegraded(true)

	wantSamples(t, scrape(t, m), "", map[string]string{
		`licensor_http_requests_total{method="GET",route="/api/licenses/:id",status="200"}`:                "2",
		`licensor_http_requests_total{method="GET",route="unmatched",status="404"}`:                        "1",
		`licensor_http_request_duration_seconds_count{method="GET",route="/api/licenses/:id"}`:             "2",
		`licensor_http_request_duration_seconds_bucket{method="GET",route="/api/licenses/:id",le="0.025"}`: "1",
		`licensor_idempotency_requests_total{operation="licenses.store",outcome="replayed"}`:               "1",
		`licensor_vendor_requests_total{call="create",status="0"}`:                                         "1",
		`licensor_vendor_requests_total{call="list",status="429"}`:                                         "1",
		`licensor_vendor_retries_total`:                                                                    "2",
		`licensor_reconcile_total{result="waiting"}`:                                                       "1",
		`licensor_prune_deleted_total`:                                                                     "7",
		`licensor_ratelimit_local_total`:                                                                   "2",
		`licensor_ratelimit_degraded`:                                                                      "1",
	})
}

func TestPendingGauges(t *testing.T) {
	oldest := time.Now().Add(-time.Minute)
	m := metrics.New(nil, func(context.Context) (metrics.IntentCounts, error) {
		return metrics.IntentCounts{Pending: 3, OldestPending: oldest, Failed: 2}, nil
	})
	body := scrape(t, m)
	wantSamples(t, body, "", map[string]string{"licensor_idempotency_pending": "3", "licensor_idempotency_failed": "2"})
	age, err := strconv.ParseFloat(sample(body, "licensor_idempotency_oldest_pending_seconds"), 64)
	if err != nil || age < 60 || age > 600 {
		t.Errorf("oldest pending age = %v (%v), want about 60", age, err)
	}

	// A failing read reports nothing pending rather than breaking the scrape.
	failing := metrics.New(nil, func(context.Context) (metrics.IntentCounts, error) {
		return metrics.IntentCounts{}, errors.New("db down")
	})
	wantSamples(t, scrape(t, failing), " with a failing read",
		zeros("licensor_idempotency_pending", "licensor_idempotency_oldest_pending_seconds", "licensor_idempotency_failed"))
}

// The webhook families exist from start-up, every outcome at 0; each
// settled attempt counts under its outcome; the gauges are read at each
// scrape, zeros when the read fails.
func TestWebhookFamilies(t *testing.T) {
	m := metrics.New(nil, nil)
	wantSamples(t, scrape(t, m), " at start-up", zeros(
		`licensor_webhook_deliveries_total{outcome="delivered"}`,
		`licensor_webhook_deliveries_total{outcome="retried"}`,
		`licensor_webhook_deliveries_total{outcome="failed"}`,
		`licensor_webhook_oldest_pending_seconds`,
		`licensor_webhook_endpoints_disabled`,
	))
	m.ObserveWebhook("retried")
	m.ObserveWebhook("retried")
	m.ObserveWebhook("delivered")
	m.ReadWebhooks(func(context.Context) (metrics.WebhookCounts, error) {
		return metrics.WebhookCounts{OldestPending: time.Now().Add(-2 * time.Minute), Disabled: 3}, nil
	})
	body := scrape(t, m)
	wantSamples(t, body, "", map[string]string{
		`licensor_webhook_deliveries_total{outcome="delivered"}`: "1",
		`licensor_webhook_deliveries_total{outcome="retried"}`:   "2",
		`licensor_webhook_deliveries_total{outcome="failed"}`:    "0",
		`licensor_webhook_endpoints_disabled`:                    "3",
	})
	if age, err := strconv.ParseFloat(sample(body, "licensor_webhook_oldest_pending_seconds"), 64); err != nil || age < 120 || age > 900 {
		t.Errorf("oldest pending age = %v (%v), want about 120", age, err)
	}
	m.ReadWebhooks(func(context.Context) (metrics.WebhookCounts, error) {
		return metrics.WebhookCounts{Disabled: 9}, errors.New("db down")
	})
	wantSamples(t, scrape(t, m), " with a failing read",
		zeros("licensor_webhook_oldest_pending_seconds", "licensor_webhook_endpoints_disabled"))
}
