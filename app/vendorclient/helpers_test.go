package vendorclient_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
)

const testToken = "vendor-token-s3cret"

// newClock is the driver's clock in tests. It starts at the current second,
// so that HTTP dates (whole seconds) are exact and real context deadlines
// still make sense; its Sleep records the wait and moves Now on at once, so
// no test waits for a Retry-After.
func newClock() *testkit.Clock { return testkit.NewClock(time.Now().Truncate(time.Second)) }

func testConfig(url string) config.Vendor {
	return config.Vendor{Driver: "http", URL: url, Token: testToken, Timeout: 5 * time.Second,
		RetryAttempts: 3, RetryBase: 500 * time.Millisecond, RetryMaxWait: 10 * time.Second}
}

// newDriver builds an HTTPDriver for url on a fake clock, with jitter that
// always adds its most (so backoffs are exact) and its log kept at Debug.
// opts come after those, so they override them.
func newDriver(t *testing.T, cfg config.Vendor, opts ...vendorclient.Option) (*vendorclient.HTTPDriver, *testkit.Clock, *testkit.Buffer) {
	t.Helper()
	logs := &testkit.Buffer{}
	clock := newClock()
	opts = append([]vendorclient.Option{
		vendorclient.WithClock(clock.Now),
		vendorclient.WithSleep(clock.Sleep),
		vendorclient.WithJitter(func(max time.Duration) time.Duration { return max }),
	}, opts...)
	d, err := vendorclient.NewHTTP(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), opts...)
	if err != nil {
		t.Fatalf("NewHTTP: %v", err)
	}
	return d, clock, logs
}

// sent is one request the stub received.
type sent struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// vendorStub answers calls from a script, one step per call, and records
// each: the Go analogue of Laravel's Http::fake and Http::assertSentCount.
type vendorStub struct {
	*httptest.Server
	t     *testing.T
	mu    sync.Mutex
	steps []http.HandlerFunc
	sent  []sent
}

func stub(t *testing.T, steps ...http.HandlerFunc) *vendorStub {
	t.Helper()
	s := &vendorStub{t: t, steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *vendorStub) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // read whole, so the server notices a client that gives up
	s.mu.Lock()
	n := len(s.sent)
	s.sent = append(s.sent, sent{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(body)})
	s.mu.Unlock()
	if n >= len(s.steps) {
		s.t.Errorf("unexpected call %d: %s %s", n+1, r.Method, r.URL)
		w.WriteHeader(http.StatusTeapot)
		return
	}
	s.steps[n](w, r)
}

func (s *vendorStub) Sent() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sent(nil), s.sent...)
}

func (s *vendorStub) assertSentCount(t *testing.T, want int) {
	t.Helper()
	if got := len(s.Sent()); got != want {
		t.Errorf("the vendor got %d calls, want %d: %v", got, want, s.Sent())
	}
}

// respond answers with status, body and header pairs ("Retry-After", "2").
func respond(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// hang never answers: it holds the request until the client gives up.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// reset closes the connection after reading the request, without an answer.
func reset(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

func siteBody(id, domain, key string) string {
	return fmt.Sprintf(`{"id":%q,"name":"Acme","domain":%q,"license_key":%q,"status":"active","created_at":"2026-01-02T03:04:05Z","plan":"gold"}`, id, domain, key)
}

// wantClass fails unless err is of the class want (a licenses sentinel).
func wantClass(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v (%T), want %v", err, err, want)
	}
	for _, other := range []error{licenses.ErrVendorUnavailable, licenses.ErrVendorRejected, licenses.ErrVendorUncertain} {
		if other != want && errors.Is(err, other) {
			t.Fatalf("err = %v is also %v", err, other)
		}
	}
}
