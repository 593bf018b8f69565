package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testToken   = "test-token-s3cret"
	licenseJSON = `{"data":{"id":"01JTEST","name":"Acme","domain":"acme.test","license_key":"LK-1","status":"active",` +
		`"vendor_site_id":"site_1","created_at":"2026-11-30T10:00:00.123456Z","updated_at":"2026-11-30T10:00:00.123456Z"}}`
)

// reply is one scripted answer of a fakeAPI.
type reply struct {
	status int
	code   string            // the error body's code; the body is {"message","code"} unless body is set
	header map[string]string // extra headers
	body   string
	reset  bool // read the request, then drop the connection unanswered: a network error
}

// recorded is what a fakeAPI was sent.
type recorded struct {
	method, path, query, key, auth, body string
}

// fakeAPI answers from a script, its last reply repeating, and records every
// request.
type fakeAPI struct {
	*httptest.Server
	mu     sync.Mutex
	script []reply
	reqs   []recorded
}

func newFakeAPI(t *testing.T, script ...reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Idempotency-Key"),
		r.Header.Get("Authorization"), string(b)})
	rp := f.script[min(n, len(f.script)-1)]
	f.mu.Unlock()
	if rp.reset {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("X-Request-Id", fmt.Sprintf("req-%d", n+1))
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	body := rp.body
	if body == "" && (rp.status >= 300 || rp.code != "") {
		body = fmt.Sprintf(`{"message":"scripted %d","code":%q}`, rp.status, rp.code)
	}
	if body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rp.status)
	io.WriteString(w, body)
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// sleepRecorder is a Client's sleep that records each wait and returns at
// once (or with ctx's error, as the real one would).
type sleepRecorder struct {
	waits []time.Duration // the retry loop runs on the caller's goroutine: no lock needed
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func noJitter(time.Duration) time.Duration     { return 0 }
func fullJitter(d time.Duration) time.Duration { return d }

// newTestClient is a Client for f that never really waits: its waits land in
// the returned recorder, without jitter unless opts say otherwise.
func newTestClient(t *testing.T, f *fakeAPI, opts ...Option) (*Client, *sleepRecorder) {
	t.Helper()
	rec := &sleepRecorder{}
	base := []Option{WithSleep(rec.sleep), WithJitter(noJitter)}
	return New(f.URL, testToken, append(base, opts...)...), rec
}

// created is a 201 with a license.
var created = reply{status: http.StatusCreated, body: licenseJSON, header: map[string]string{"Location": "/api/licenses/01JTEST"}}

// assertOneKey checks that every request carried the same non-empty key.
func assertOneKey(t *testing.T, reqs []recorded) {
	t.Helper()
	if len(reqs) == 0 || reqs[0].key == "" {
		t.Fatalf("requests = %+v, want an Idempotency-Key on the first", reqs)
	}
	for i, r := range reqs {
		if r.key != reqs[0].key || r.body != reqs[0].body {
			t.Errorf("request %d: key %q body %s, want key %q body %s (the first's)", i+1, r.key, r.body, reqs[0].key, reqs[0].body)
		}
	}
}

func mustNotContain(t *testing.T, what, s, secret string) {
	t.Helper()
	if strings.Contains(s, secret) {
		t.Errorf("%s contains the token: %s", what, s)
	}
}
