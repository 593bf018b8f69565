// Package tests holds licensor's black-box feature tests: each runs through
// the same app/http server that `licensor serve` builds, on a real database
// (SQLite always, MySQL when TEST_MYSQL_DSN is set).
package tests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Test settings shared by every feature test.
const (
	testIssuer = "http://licensor.test"
	testTTL    = 24 * time.Hour
)

var testKey = []byte("0123456789abcdef0123456789abcdef") // APP_KEY's 32 bytes, for tests only

// app is one test's application, built by the same bootstrap `licensor
// serve` uses, with its server, database and counting vendor.
type app struct {
	t      *testing.T
	app    *console.App
	db     *testdb.DB
	e      *echo.Echo
	auth   *auth.Service
	vendor *vendor
	logs   *testkit.Buffer // everything the server logged
	store  *idempotency.Store
}

// vendorTimeout is the test driver's per-call timeout: short, since some
// tests make the vendor hold a call until the driver gives up.
const vendorTimeout = 2 * time.Second

// option adjusts a test's configuration or overrides before the bootstrap.
type option func(*config.Config, *console.Overrides)

// withConfig changes the configuration the app is built from.
func withConfig(f func(*config.Config)) option {
	return func(c *config.Config, _ *console.Overrides) { f(c) }
}

// withClock runs every service of the app on clk.
func withClock(clk *testkit.Clock) option {
	return func(_ *config.Config, o *console.Overrides) { o.Now = clk.Now }
}

// testConfig is the configuration every feature test starts from: the http
// vendor driver pointed at the test's counting vendor.
func testConfig(vendorURL string) config.Config {
	return config.Config{
		Env: config.EnvTesting, Key: testKey, URL: testIssuer, Issuer: testIssuer, MaxBody: 64 << 10, TokenTTL: testTTL,
		Vendor: config.Vendor{
			Driver: "http", URL: vendorURL, Token: "vendor-secret-token", Timeout: vendorTimeout,
			RetryAttempts: 3, RetryBase: 10 * time.Millisecond, RetryMaxWait: 10 * time.Second,
		},
		// The replay cache on, as in production (IDEMPOTENCY_REPLAY_CACHE).
		Idempotency: config.Idempotency{TTL: time.Hour, LockTimeout: time.Minute, ReplayCache: 1024},
		Reconcile:   config.Reconcile{Interval: 15 * time.Second, Settle: settle, MaxAttempts: 10},
		PruneEvery:  time.Hour,
		LogLevel:    "debug",
		LogFormat:   "json",
	}
}

// newApp builds the application through console.Bootstrap, as serve does,
// on the test's database and counting vendor; opts may adjust it.
func newApp(t *testing.T, db *testdb.DB, opts ...option) *app {
	t.Helper()
	v := newVendor(t)
	logs := &testkit.Buffer{}
	cfg := testConfig(v.srv.URL)
	o := console.Overrides{
		DB: db.Gorm, Read: db.Read,
		// The driver does not really wait between 429 retries.
		VendorOptions: []vendorclient.Option{vendorclient.WithSleep(func(ctx context.Context, _ time.Duration) error { return ctx.Err() })},
	}
	for _, opt := range opts {
		opt(&cfg, &o)
	}
	built, err := console.Bootstrap(context.Background(), cfg, console.NewLogger(cfg, logs), o)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	t.Cleanup(func() {
		if err := built.Close(); err != nil {
			t.Errorf("close app: %v", err)
		}
	})
	return &app{t: t, app: built, db: db, e: built.Server(), auth: built.Auth, vendor: v, logs: logs, store: built.Store}
}

// token issues a token for the consumer with the abilities and returns it.
func (a *app) token(consumer string, abilities ...string) string {
	a.t.Helper()
	return a.issued(consumer, abilities...).Secret
}

// bearer is the header pair for a token.
func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// response is a recorded response with helpers for asserting on it.
type response struct {
	*httptest.ResponseRecorder
	t *testing.T
}

// do sends a request through the server; headers come in name, value pairs.
func (a *app) do(method, path, body string, headers ...string) *response {
	a.t.Helper()
	rec, err := exchange(a.e, method, path, body, headers)
	if err != nil {
		a.t.Errorf("contract: %v", err)
	}
	return &response{ResponseRecorder: rec, t: a.t}
}

// exchange sends a request through the handler (a body is JSON unless the
// headers say otherwise) and checks the exchange against the contract.
func exchange(e *echo.Echo, method, path, body string, headers []string) (*httptest.ResponseRecorder, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec, checkContract(req, rec.Code, rec.Result().Header, rec.Body.Bytes())
}

// wantStatus fails the test unless the status is want.
func (r *response) wantStatus(want int) *response {
	r.t.Helper()
	if r.Code != want {
		r.t.Fatalf("status = %d, want %d; body: %s", r.Code, want, r.Body.String())
	}
	return r
}

// json decodes the body into a generic map.
func (r *response) json() map[string]any {
	r.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body.Bytes(), &m); err != nil {
		r.t.Fatalf("body is not a JSON object: %v: %q", err, r.Body.String())
	}
	return m
}

// wantError asserts a Laravel-shaped error body with the message and code.
func (r *response) wantError(status int, code string) map[string]any {
	r.t.Helper()
	r.wantStatus(status)
	if ct := r.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		r.t.Errorf("Content-Type = %q, want JSON", ct)
	}
	m := r.json()
	if msg, _ := m["message"].(string); msg == "" {
		r.t.Errorf("error body has no message: %s", r.Body.String())
	}
	if got, _ := m["code"].(string); got != code {
		r.t.Errorf("code = %q, want %q; body: %s", got, code, r.Body.String())
	}
	return m
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
