package console

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/client"
	"github.com/licensor-api/licensor/internal/testkit"
)

// fakeTime is a clock that only the recorded sleeps move: the command's
// 10 s are simulated, never waited.
type fakeTime struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (f *fakeTime) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *fakeTime) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	f.now = f.now.Add(d)
	return ctx.Err()
}

func (f *fakeTime) total() time.Duration {
	var t time.Duration
	for _, w := range f.waits {
		t += w
	}
	return t
}

// Nothing listens at LICENSOR_URL for good: create and list retry the
// refused connection for at most 10 s (on the injected clock), then fail
// saying that nothing was sent, as a failure (exit 1), not a usage error.
func TestLicensesNothingListensRetriesTenSeconds(t *testing.T) {
	addr := testkit.FreeAddr(t)
	for _, args := range [][]string{{"create", "--name", "Acme", "--domain", "acme.test"}, {"list"}} {
		ft := &fakeTime{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
		e := licensesEnv(args, "http://"+addr, &bytes.Buffer{}, &bytes.Buffer{})
		start := time.Now()
		err := licensesCmd(context.Background(), e, client.WithSleep(ft.sleep), client.WithClock(ft.clock),
			client.WithMaxAttempts(1000), client.WithJitter(func(d time.Duration) time.Duration { return d }))
		assertLicensesFailure(t, err, "nothing was sent", "nothing happened, since no request reached licensor", "connection refused", "http://"+addr)
		if strings.Contains(err.Error(), "may have") {
			t.Errorf("%q: %v; want no doubt about the outcome", args, err)
		}
		// Full jitter: 0.2+0.4+0.8+1.6+3.2 = 6.2 s; the next 5 s would pass 10 s.
		if got := ft.total(); len(ft.waits) != 5 || got != 6200*time.Millisecond {
			t.Errorf("%q: waits %v (%v), want 5 doubling waits within 10 s", args, ft.waits, got)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q took %s of real time; the waits are simulated", args, d)
		}
	}
}

// With the default jitter the 10 s bound holds whatever the draws.
func TestLicensesNetworkRetriesBoundedByTenSeconds(t *testing.T) {
	addr := testkit.FreeAddr(t)
	for range 20 {
		ft := &fakeTime{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
		e := licensesEnv([]string{"create", "--name", "Acme", "--domain", "acme.test"}, "http://"+addr, &bytes.Buffer{}, &bytes.Buffer{})
		err := licensesCmd(context.Background(), e, client.WithSleep(ft.sleep), client.WithClock(ft.clock), client.WithMaxAttempts(1000))
		if err == nil || ft.total() > networkRetryWindow || len(ft.waits) < 4 {
			t.Fatalf("err %v after waits %v (%v): want a failure after at least 4 retries within %v", err, ft.waits, ft.total(), networkRetryWindow)
		}
	}
}

// The server reads each request and drops the connection: the requests
// reached licensor, so the command cannot say nothing happened; it says the
// outcome is unknown and prints the key every attempt carried.
func TestLicensesLostAnswerOutcomeUnknown(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	ft := &fakeTime{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	e := licensesEnv([]string{"create", "--name", "Acme", "--domain", "acme.test"}, "http://"+ln.Addr().String(), &bytes.Buffer{}, &bytes.Buffer{})
	err = licensesCmd(context.Background(), e, client.WithSleep(ft.sleep), client.WithClock(ft.clock), client.WithMaxAttempts(1000))
	mu.Lock()
	defer mu.Unlock()
	if len(keys) < 2 {
		t.Fatalf("attempts %d, want the lost answers retried", len(keys))
	}
	for _, k := range keys {
		if k != keys[0] || k == "" {
			t.Fatalf("keys %q, want one key on every attempt", keys)
		}
	}
	assertLicensesFailure(t, err, "the outcome is unknown", "may have been created", "--key "+keys[0])
	if strings.Contains(err.Error(), "nothing was sent") || strings.Contains(err.Error(), "nothing happened") {
		t.Errorf("err = %v: requests were sent; it must not say nothing happened", err)
	}
	if ft.total() > networkRetryWindow {
		t.Errorf("waited %v, want at most %v", ft.total(), networkRetryWindow)
	}
}

// licensor restarts: the port refuses connections, then answers; the
// create goes through with one key and prints the license.
func TestLicensesCreateRidesOutRestart(t *testing.T) {
	addr := testkit.FreeAddr(t)
	var mu sync.Mutex
	var keys []string
	ft := &fakeTime{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	up := func(ctx context.Context, d time.Duration) error {
		_ = ft.sleep(ctx, d)
		if len(ft.waits) == 2 {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("listen again on %s: %v", addr, err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"data":` + licensesTestJSON + `}`))
			})}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })
		}
		return ctx.Err()
	}
	var stdout, stderr bytes.Buffer
	e := licensesEnv([]string{"create", "--name", "Acme", "--domain", "acme.test", "--key", "restart-key-1"}, "http://"+addr, &stdout, &stderr)
	if err := licensesCmd(context.Background(), e, client.WithSleep(up), client.WithClock(ft.clock)); err != nil {
		t.Fatalf("create through a restart: %v", err)
	}
	if len(keys) != 1 || keys[0] != "restart-key-1" || len(ft.waits) != 2 {
		t.Errorf("keys %q after waits %v, want restart-key-1 once after 2 waits", keys, ft.waits)
	}
	if !strings.Contains(stdout.String(), `"id": "01JCLI"`) {
		t.Errorf("stdout = %s, want the license", stdout.String())
	}
}
