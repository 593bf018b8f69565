// Package metrics holds the Prometheus families licensor exposes at
// /metrics. It imports Prometheus and the standard library only: the HTTP
// layer, the vendor driver and the background jobs report through its
// Observe methods, which main hands them as plain functions.
package metrics

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the Prometheus families licensor exposes at /metrics. Every
// family exists from start-up, its known label values at 0.
type Metrics struct {
	reg                 *prometheus.Registry
	httpRequests        *prometheus.CounterVec
	httpDuration        *prometheus.HistogramVec
	idempotency         *prometheus.CounterVec
	vendorRequests      *prometheus.CounterVec
	vendorRetries       prometheus.Counter
	reconcile           *prometheus.CounterVec
	pruned              prometheus.Counter
	drift               *prometheus.GaugeVec
	siteMismatches      *prometheus.CounterVec
	webhooks            *prometheus.CounterVec
	webhookStats        *webhookGauges
	rateLocal           prometheus.Counter
	rateDegraded        prometheus.Gauge
	concurrencyLimited  prometheus.Counter
	vendorEventsRefused *prometheus.CounterVec
	// httpSeries are the HTTP families' series by route, method and
	// status, looked up once each: ObserveHTTP is on every request, and a
	// family's WithLabelValues hashes its labels under a lock every call.
	// The families are never reset, so a series found stays theirs.
	httpSeries sync.Map // httpKey → httpSeries
	// idempotencySeries are the idempotency family's series by operation
	// and outcome, for the same reason.
	idempotencySeries sync.Map // [2]string → prometheus.Counter
}

// httpKey is one series of the HTTP families.
type httpKey struct {
	route, method string
	status        int
}

// httpSeries is a request's two series: its count and its duration.
type httpSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// standardMethods are the HTTP methods counted under their own name.
var standardMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

// Known label values, initialised to 0 so dashboards and alerts see them.
var (
	idempotencyOutcomes = []string{"executed", "replayed", "in_progress", "mismatch", "pending", "not_kept", "released", "taken_over", "superseded", "discarded"}
	reconcileResults    = []string{"completed", "waiting", "retry", "failed", "abandoned", "superseded"}
	driftKinds          = []string{"site_gone", "status_differs", "key_differs", "orphan_site", "domain_differs"} // licenses.DriftKinds
	mismatchSources     = []string{"webhook", "drift"}                                                            // licenses.MismatchWebhook, MismatchDrift
	webhookOutcomes     = []string{"delivered", "retried", "failed"}                                              // webhooks.Outcomes
	vendorEventRefusals = []string{"invalid_signature", "signature_expired", "malformed_json", "future_event", "invalid_event_id"}
)

// IntentCounts is what the intent gauges report.
type IntentCounts struct {
	Pending       int64     // intents awaiting reconciliation
	OldestPending time.Time // when the oldest of them was created; zero when none
	Failed        int64     // intents reconciliation gave up on for now
}

// IntentStats reads the intent counts. It is called at each scrape, so that
// every replica reports what the database holds, not what it has seen.
type IntentStats func(ctx context.Context) (IntentCounts, error)

// New registers every family. operations are the guarded operations (more
// can be declared with DeclareOperations); intents is read at each scrape.
func New(operations []string, intents IntentStats) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := promFactory{m.reg}
	m.httpRequests = f.counterVec("licensor_http_requests_total", "HTTP requests by route, method and status.", "route", "method", "status")
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "licensor_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method"})
	m.reg.MustRegister(m.httpDuration)
	m.idempotency = f.counterVec("licensor_idempotency_requests_total", "Idempotent requests by operation and outcome.", "operation", "outcome")
	m.vendorRequests = f.counterVec("licensor_vendor_requests_total", "Vendor calls by call and status (0: no answer).", "call", "status")
	m.vendorRetries = f.counter("licensor_vendor_retries_total", "Vendor calls repeated after a 429.")
	m.reconcile = f.counterVecOf("licensor_reconcile_total", "Reconciliations of pending intents by result.", "result", reconcileResults)
	m.pruned = f.counter("licensor_prune_deleted_total", "Expired idempotency records deleted.")
	m.rateLocal = f.counter("licensor_ratelimit_local_total",
		"Requests this replica counted alone, against its share of the rate limit (RATE_LIMIT_FALLBACK_SHARE), because the rate limit's store (RATE_LIMIT_STORE) could not count them: Redis down, slow or refusing; a database write that failed.")
	m.rateDegraded = prometheus.NewGauge(prometheus.GaugeOpts{Name: "licensor_ratelimit_degraded",
		Help: "1 while this replica counts the rate limit alone because its store does not count (the last count failed), else 0."})
	m.reg.MustRegister(m.rateDegraded)
	m.concurrencyLimited = f.counter("licensor_concurrency_limited_total",
		"Writes refused with 429 concurrency_limited: their consumer already had CONSUMER_CONCURRENCY writes in flight on this replica.")
	m.drift = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "licensor_drift_mismatches", Help: "Mismatches between the vendor's sites and the licenses at the last drift check, by kind.",
	}, []string{"kind"})
	m.reg.MustRegister(m.drift)
	for _, kind := range driftKinds {
		m.drift.WithLabelValues(kind).Set(0)
	}
	m.siteMismatches = f.counterVecOf("licensor_vendor_site_mismatches_total",
		"Vendor sites whose id is a license's but whose domain is not (nothing applied), by source: webhook or drift.", "source", mismatchSources)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(intentGauges{read: intents})
	m.webhooks = f.counterVecOf("licensor_webhook_deliveries_total",
		"Webhook delivery attempts by outcome: delivered (2xx), retried (failed, tried again later), failed (given up at the end of WEBHOOK_RETRY_FOR).", "outcome", webhookOutcomes)
	m.vendorEventsRefused = f.counterVecOf("licensor_vendor_webhooks_refused_total",
		"The vendor's webhooks refused before anything was recorded, by reason: invalid_signature, signature_expired, malformed_json, future_event (created ahead of now), invalid_event_id (an id with a space, non-ASCII or over 255 characters).", "reason", vendorEventRefusals)
	m.webhookStats = &webhookGauges{}
	m.reg.MustRegister(m.webhookStats)
	m.DeclareOperations(operations)
	return m
}

// DeclareVendorCall exposes the vendor call's counter from start-up, at 0
// for its success status (the vendor protocol's calls are main's to name).
func (m *Metrics) DeclareVendorCall(call string, ok int) {
	m.vendorRequests.WithLabelValues(call, strconv.Itoa(ok))
}

// DeclareOperations exposes the idempotency counters of operations from
// start-up, at 0 for every outcome.
func (m *Metrics) DeclareOperations(operations []string) {
	for _, op := range operations {
		for _, o := range idempotencyOutcomes {
			m.idempotency.WithLabelValues(op, o)
		}
	}
}

// intentGauges are read from the database at each scrape, one read for all.
type intentGauges struct {
	read IntentStats
}

var (
	pendingDesc = prometheus.NewDesc("licensor_idempotency_pending", "Pending intents awaiting reconciliation.", nil, nil)
	oldestDesc  = prometheus.NewDesc("licensor_idempotency_oldest_pending_seconds", "Age of the oldest pending intent (0 when none).", nil, nil)
	failedDesc  = prometheus.NewDesc("licensor_idempotency_failed", "Intents reconciliation gave up on for now: retried every RECONCILE_FAILED_INTERVAL, or by an operator.", nil, nil)
)

// Describe implements prometheus.Collector.
func (g intentGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestDesc
	ch <- failedDesc
}

// Collect implements prometheus.Collector.
func (g intentGauges) Collect(ch chan<- prometheus.Metric) {
	c := scraped(g.read)
	age := 0.0
	if !c.OldestPending.IsZero() {
		age = time.Since(c.OldestPending).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(c.Pending))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(failedDesc, prometheus.GaugeValue, float64(c.Failed))
}

// scraped is what read answers at a scrape, within two seconds: zeros when
// there is no read or it fails, rather than a broken scrape.
func scraped[T any](read func(context.Context) (T, error)) T {
	var zero T
	if read == nil {
		return zero
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := read(ctx)
	if err != nil {
		return zero
	}
	return c
}

// WebhookCounts is what the webhook gauges report.
type WebhookCounts struct {
	OldestPending time.Time // when the oldest pending delivery of an enabled endpoint began trying; zero when none
	Disabled      int64     // endpoints disabled (after failing for WEBHOOK_RETRY_FOR, or by their consumer)
}

// WebhookStats reads the webhook counts at each scrape.
type WebhookStats func(ctx context.Context) (WebhookCounts, error)

// ReadWebhooks sets where the webhook gauges are read from (until then: zeros).
func (m *Metrics) ReadWebhooks(read WebhookStats) { m.webhookStats.read.Store(&read) }

type webhookGauges struct {
	read atomic.Pointer[WebhookStats]
}

var (
	webhookOldestDesc = prometheus.NewDesc("licensor_webhook_oldest_pending_seconds",
		"Age of the oldest pending webhook delivery of an enabled endpoint, since its retry window began (0 when none).", nil, nil)
	webhookDisabledDesc = prometheus.NewDesc("licensor_webhook_endpoints_disabled",
		"Webhook endpoints disabled: after failing every delivery for WEBHOOK_RETRY_FOR, or by their consumer.", nil, nil)
)

// Describe implements prometheus.Collector.
func (g *webhookGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- webhookOldestDesc
	ch <- webhookDisabledDesc
}

// Collect implements prometheus.Collector.
func (g *webhookGauges) Collect(ch chan<- prometheus.Metric) {
	var read WebhookStats
	if p := g.read.Load(); p != nil {
		read = *p
	}
	c := scraped(read)
	age := 0.0
	if !c.OldestPending.IsZero() {
		age = max(0, time.Since(c.OldestPending).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(webhookOldestDesc, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(webhookDisabledDesc, prometheus.GaugeValue, float64(c.Disabled))
}

// Handler serves the families in Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveHTTP counts a finished request and its latency. Every label is
// bounded whatever a client sends: route is the matched route's template, never
// the raw path ("" is "unmatched"), and a non-standard method is "OTHER".
func (m *Metrics) ObserveHTTP(route, method string, status int, elapsed time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	if !slices.Contains(standardMethods, method) {
		method = "OTHER"
	}
	k := httpKey{route: route, method: method, status: status}
	v, ok := m.httpSeries.Load(k)
	if !ok {
		v, _ = m.httpSeries.LoadOrStore(k, httpSeries{
			requests: m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)),
			duration: m.httpDuration.WithLabelValues(route, method),
		})
	}
	series := v.(httpSeries)
	series.requests.Inc()
	series.duration.Observe(elapsed.Seconds())
}

// ObserveIdempotency counts one idempotent request's outcome.
func (m *Metrics) ObserveIdempotency(operation, outcome string) {
	k := [2]string{operation, outcome}
	c, ok := m.idempotencySeries.Load(k)
	if !ok {
		c, _ = m.idempotencySeries.LoadOrStore(k, m.idempotency.WithLabelValues(operation, outcome))
	}
	c.(prometheus.Counter).Inc()
}

// ObserveVendor counts one vendor answer (status 0: none came).
func (m *Metrics) ObserveVendor(call string, status int) {
	m.vendorRequests.WithLabelValues(call, strconv.Itoa(status)).Inc()
}

// ObserveVendorRetry counts one retry after a 429. The call is not a label
// (the family has none); the parameter lets it serve as the driver's hook.
func (m *Metrics) ObserveVendorRetry(call string) { m.vendorRetries.Inc() }

// ObserveReconcile counts one reconciliation's result.
func (m *Metrics) ObserveReconcile(result string) { m.reconcile.WithLabelValues(result).Inc() }

// ObserveDrift records the mismatches of the last drift check, by kind.
func (m *Metrics) ObserveDrift(counts map[string]int) {
	for kind, n := range counts {
		m.drift.WithLabelValues(kind).Set(float64(n))
	}
}

// ObserveVendorEventRefused counts a vendor webhook refused for reason.
func (m *Metrics) ObserveVendorEventRefused(reason string) {
	m.vendorEventsRefused.WithLabelValues(reason).Inc()
}

// ObserveSiteMismatch counts one vendor site matched by id and not by domain.
func (m *Metrics) ObserveSiteMismatch(source string) { m.siteMismatches.WithLabelValues(source).Inc() }

// ObserveWebhook counts one settled webhook delivery attempt by outcome.
func (m *Metrics) ObserveWebhook(outcome string) { m.webhooks.WithLabelValues(outcome).Inc() }

// ObserveRateLimitLocal counts a request the rate limit's store could not count.
func (m *Metrics) ObserveRateLimitLocal() { m.rateLocal.Inc() }

// SetRateLimitDegraded says whether this replica counts the rate limit alone.
func (m *Metrics) SetRateLimitDegraded(on bool) {
	if on {
		m.rateDegraded.Set(1)
	} else {
		m.rateDegraded.Set(0)
	}
}

// ObserveConcurrencyLimited counts a write refused with 429 concurrency_limited.
func (m *Metrics) ObserveConcurrencyLimited() { m.concurrencyLimited.Inc() }

// ObservePruned counts deleted expired records.
func (m *Metrics) ObservePruned(n int64) { m.pruned.Add(float64(n)) }

type promFactory struct{ reg *prometheus.Registry }

func (f promFactory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

// counterVecOf is counterVec of one label, its known values at 0.
func (f promFactory) counterVecOf(name, help, label string, values []string) *prometheus.CounterVec {
	c := f.counterVec(name, help, label)
	for _, v := range values {
		c.WithLabelValues(v)
	}
	return c
}
