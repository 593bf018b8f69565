package console

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

// healthcheckRun runs `licensor healthcheck args...` and returns its stdout,
// exit code and error.
func healthcheckRun(t *testing.T, vars map[string]string, args ...string) (string, int, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), append([]string{"healthcheck"}, args...), getenvOf(vars), &stdout, &stderr)
	return stdout.String(), ExitCode(err), err
}

// A 2xx from /readyz is healthy (exit 0); any other answer, or none, is not
// (exit 1); a bad URL is a usage error (exit 2).
func TestHealthcheckExitCodes(t *testing.T) {
	t.Chdir(t.TempDir())
	var ready atomic.Bool
	var mu sync.Mutex
	var asked []string
	paths := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(asked) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		switch {
		case r.URL.Path == "/moved":
			http.Redirect(w, r, "/readyz", http.StatusFound)
		case ready.Load():
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	ready.Store(true)
	out, code, err := healthcheckRun(t, nil, srv.URL)
	if code != 0 || !strings.Contains(out, srv.URL+"/readyz: 200") {
		t.Errorf("ready: exit %d (%v), stdout %q; want 0 and the URL with 200", code, err, out)
	}
	if got := paths(); !slices.Equal(got, []string{"/readyz"}) {
		t.Errorf("asked %v, want /readyz (a URL without a path gets it)", got)
	}
	if _, code, _ := healthcheckRun(t, nil, srv.URL+"/healthz"); code != 0 || !slices.Equal(paths(), []string{"/readyz", "/healthz"}) {
		t.Errorf("an explicit path: exit %d, asked %v", code, paths())
	}

	ready.Store(false)
	if _, code, err := healthcheckRun(t, nil, srv.URL); code != 1 || !strings.Contains(err.Error(), "503") {
		t.Errorf("not ready: exit %d (%v), want 1 naming the 503", code, err)
	}
	ready.Store(true)
	if _, code, err := healthcheckRun(t, nil, srv.URL+"/moved"); code != 1 {
		t.Errorf("a redirect: exit %d (%v), want 1: redirects are not followed", code, err)
	}

	closed := testkit.FreeAddr(t) // nothing listens there
	if _, code, err := healthcheckRun(t, nil, "http://"+closed+"/readyz"); code != 1 {
		t.Errorf("nothing listening: exit %d (%v), want 1", code, err)
	}
	for _, args := range [][]string{{"ftp://example.test"}, {"not a url"}, {"http://a.test", "http://b.test"}, {"--timeout", "0s"}, {"--bogus"}} {
		if _, code, err := healthcheckRun(t, nil, args...); code != 2 {
			t.Errorf("healthcheck %q: exit %d (%v), want 2", args, code, err)
		}
	}
}

// Without a URL it asks /readyz on APP_ADDR, 0.0.0.0 (all interfaces, as in
// the image) on the loopback, without needing APP_KEY or anything else.
func TestHealthcheckDefaultsToAppAddr(t *testing.T) {
	t.Chdir(t.TempDir())
	var asked atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.Host + r.URL.Path)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	vars := map[string]string{"APP_ADDR": "0.0.0.0:" + port, "APP_ENV": "production"} // production, no APP_KEY
	if _, code, err := healthcheckRun(t, vars); code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if got := asked.Load(); got != "127.0.0.1:"+port+"/readyz" {
		t.Errorf("asked %v, want 127.0.0.1:%s/readyz", got, port)
	}
}

// A server that never answers fails the check within --timeout.
func TestHealthcheckTimeout(t *testing.T) {
	t.Chdir(t.TempDir())
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	_, code, err := healthcheckRun(t, nil, "--timeout", "200ms", srv.URL)
	if code != 1 || time.Since(start) > 5*time.Second {
		t.Errorf("exit %d after %v (%v), want 1 within the timeout", code, time.Since(start), err)
	}
}

func TestHealthcheckReadyzURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":   "http://127.0.0.1:8080/readyz",
		"[::]:8080":      "http://127.0.0.1:8080/readyz",
		":9000":          "http://127.0.0.1:9000/readyz",
		"127.0.0.1:8080": "http://127.0.0.1:8080/readyz",
		"10.1.2.3:81":    "http://10.1.2.3:81/readyz",
		"[::1]:8080":     "http://[::1]:8080/readyz",
	} {
		if got, err := readyzURL(addr); err != nil || got != want {
			t.Errorf("readyzURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := readyzURL("8080"); err == nil {
		t.Error("readyzURL(8080) without a host:port: want an error")
	}
}
