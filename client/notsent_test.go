package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// closedAddr is a loopback address nothing listens on (a port the system
// handed out and took back), as internal/testkit.FreeAddr gives; package
// client imports nothing of the module but internal/hmacsig, its tests
// included.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// restartingAPI is a server at a fixed address that is down (the port
// refuses connections) until it is started: a rolling restart. Its sleep
// records each wait and starts the server after the upAfter-th, so that no
// test really waits.
type restartingAPI struct {
	t       *testing.T
	addr    string
	upAfter int
	mu      sync.Mutex
	waits   []time.Duration
	keys    []string
	bodies  []string
	srv     *http.Server
	now     time.Time // the clock the sleep moves forward
}

func newRestartingAPI(t *testing.T, upAfter int) *restartingAPI {
	return &restartingAPI{t: t, addr: closedAddr(t), upAfter: upAfter, now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

func (a *restartingAPI) sleep(ctx context.Context, d time.Duration) error {
	a.mu.Lock()
	a.waits = append(a.waits, d)
	a.now = a.now.Add(d)
	start := len(a.waits) == a.upAfter
	a.mu.Unlock()
	if start {
		ln, err := net.Listen("tcp", a.addr) // the same port, back up
		if err != nil {
			a.t.Fatalf("reopen %s: %v", a.addr, err)
		}
		a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 512)
			n, _ := r.Body.Read(b)
			a.mu.Lock()
			a.keys = append(a.keys, r.Header.Get("Idempotency-Key"))
			a.bodies = append(a.bodies, string(b[:n]))
			a.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			if r.Method == http.MethodPost {
				w.WriteHeader(http.StatusCreated)
			}
			_, _ = w.Write([]byte(licenseJSON))
		})}
		go func() { _ = a.srv.Serve(ln) }()
		a.t.Cleanup(func() { a.srv.Close() })
	}
	return ctx.Err()
}

func (a *restartingAPI) clock() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.now
}

// A create whose connections are refused (licensor restarting) is retried
// with doubling waits, and the attempt once the server is back carries the
// key of the first: one intent.
func TestRefusedConnectionRetriedThroughRestart(t *testing.T) {
	a := newRestartingAPI(t, 3)
	c := New("http://"+a.addr, testToken, WithSleep(a.sleep), WithJitter(noJitter), WithBackoff(100*time.Millisecond, time.Second))
	key := NewIdempotencyKey()
	lic, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test", IdempotencyKey: key})
	if err != nil {
		t.Fatalf("create through a restart: %v", err)
	}
	if !lic.Created || lic.ID != "01JTEST" {
		t.Errorf("license = %+v, want the created one", lic)
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	if !slices.Equal(a.waits, want) {
		t.Errorf("waits = %v, want %v: doubling (half the step, no jitter)", a.waits, want)
	}
	if len(a.keys) != 1 || a.keys[0] != key {
		t.Errorf("keys the server got = %q, want [%q]: the caller's key, once", a.keys, key)
	}
}

// Reads and revokes ride out a restart too; so does a GET of any kind.
func TestRefusedConnectionRetriedForSafeRequests(t *testing.T) {
	for name, call := range map[string]func(*Client) error{
		"list":   func(c *Client) error { _, err := c.ListLicenses(context.Background(), 1, 15); return err },
		"get":    func(c *Client) error { _, err := c.GetLicense(context.Background(), "01JTEST"); return err },
		"revoke": func(c *Client) error { return c.RevokeLicense(context.Background(), "01JTEST") },
	} {
		t.Run(name, func(t *testing.T) {
			a := newRestartingAPI(t, 2)
			c := New("http://"+a.addr, testToken, WithSleep(a.sleep), WithJitter(noJitter))
			// The answer (a license, whatever the call) need not fit the
			// call: reaching the server is what is checked.
			if err := call(c); errors.Is(err, ErrNotSent) {
				t.Fatalf("%s through a restart: %v", name, err)
			}
			if len(a.waits) != 2 || len(a.keys) != 1 {
				t.Errorf("waits %v, requests answered %d; want 2 waits, then 1 answered", a.waits, len(a.keys))
			}
		})
	}
}

// A server that never comes back: the call stops after its attempts, each
// wait doubling within [step/2, step], and says nothing was sent.
func TestRefusedConnectionStopsAfterMaxAttempts(t *testing.T) {
	a := newRestartingAPI(t, -1) // never up
	var asked []time.Duration
	c := New("http://"+a.addr, testToken, WithSleep(a.sleep), WithMaxAttempts(5),
		WithJitter(func(d time.Duration) time.Duration { asked = append(asked, d); return d / 2 }))
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	if !errors.Is(err, ErrNotSent) || !strings.Contains(err.Error(), "gave up after 5 attempts") {
		t.Fatalf("err = %v, want ErrNotSent after 5 attempts", err)
	}
	ms := time.Millisecond
	want := []time.Duration{150 * ms, 300 * ms, 600 * ms, 1200 * ms} // step 200, 400, 800, 1600 ms: half plus half of the other half
	if !slices.Equal(a.waits, want) {
		t.Errorf("waits = %v, want %v", a.waits, want)
	}
	if !slices.Equal(asked, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms}) {
		t.Errorf("jitter asked for %v, want up to half of each step", asked)
	}
}

// The network window ends the retries of a server that stays down before
// the attempts are spent; no wait crosses it.
func TestNetworkRetryWindow(t *testing.T) {
	a := newRestartingAPI(t, -1)
	c := New("http://"+a.addr, testToken, WithSleep(a.sleep), WithClock(a.clock), WithJitter(fullJitter),
		WithMaxAttempts(100), WithNetworkRetryWindow(10*time.Second))
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrNetworkWindow) {
		t.Fatalf("err = %v, want ErrNotSent and ErrNetworkWindow", err)
	}
	var total time.Duration
	for _, w := range a.waits {
		total += w
	}
	// 0.2+0.4+0.8+1.6+3.2 s = 6.2 s; the next step (5 s) would pass 10 s.
	if len(a.waits) != 5 || total != 6200*time.Millisecond {
		t.Errorf("waits = %v (%v in all), want 5 waits, 6.2 s, then stop", a.waits, total)
	}
}

// A create is retried when the connection dies after the request was
// written (the key makes it safe): the error is not ErrNotSent, and every
// attempt carried the same key.
func TestErrorAfterWriteRetriedWithSameKey(t *testing.T) {
	f := newFakeAPI(t, reply{reset: true}, reply{reset: true}, created)
	c, rec := newTestClient(t, f)
	if _, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"}); err != nil {
		t.Fatalf("create after 2 dropped connections: %v", err)
	}
	if len(f.requests()) != 3 || len(rec.waits) != 2 || rec.waits[1] != 2*rec.waits[0] {
		t.Errorf("requests %d, waits %v; want 3 and 2 doubling waits", len(f.requests()), rec.waits)
	}
	assertOneKey(t, f.requests())

	f = newFakeAPI(t, reply{reset: true})
	c, _ = newTestClient(t, f, WithMaxAttempts(2))
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	if err == nil || errors.Is(err, ErrNotSent) {
		t.Errorf("create whose connection always closes after the write: %v; want an error that is not ErrNotSent", err)
	}
}
