package console

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
)

// TestVendorSimRidesOutA429Burst runs `licensor vendor-sim --429-burst 2
// --retry-after 1` and drives it with the http driver: one create succeeds on
// the third vendor call, after two waits of the second asked.
func TestVendorSimRidesOutA429Burst(t *testing.T) {
	addr, stderr, stop := runVendorSim(t, "--token", "sim-token", "--429-burst", "2", "--retry-after", "1")
	defer stop()

	var mu sync.Mutex
	var waits []time.Duration
	var statuses []int
	sleep := func(ctx context.Context, wait time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, wait)
		return ctx.Err()
	}
	observe := func(_ string, status int) {
		mu.Lock()
		defer mu.Unlock()
		statuses = append(statuses, status)
	}
	d, err := vendorclient.NewHTTP(config.Vendor{Driver: "http", URL: "http://" + addr, Token: "sim-token",
		Timeout: 5 * time.Second, RetryAttempts: 3, RetryBase: time.Second, RetryMaxWait: 10 * time.Second}, nil,
		vendorclient.WithSleep(sleep), vendorclient.WithObserver(observe, nil))
	if err != nil {
		t.Fatal(err)
	}

	if _, err := d.CreateSite(context.Background(), "Acme", "acme.test"); err != nil {
		t.Fatalf("CreateSite through the burst: %v", err)
	}
	mu.Lock()
	if want := []int{429, 429, 201}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("vendor answers = %v, want %v", statuses, want)
	}
	if want := []time.Duration{time.Second, time.Second}; !reflect.DeepEqual(waits, want) {
		t.Errorf("waits = %v, want %v", waits, want)
	}
	mu.Unlock()

	stop()
	if !strings.Contains(stderr.String(), "addr=http://"+addr) {
		t.Errorf("vendor-sim did not log its address:\n%s", stderr)
	}
}

// TestVendorSimChaosKnobs runs `licensor vendor-sim` with a seed, a random
// 5xx after the commit and a state file: the create is committed and
// answered 500, /_sim/stats says so, DELETE /_sim/faults clears the faults over
// the wire, and a second run on the state file still holds the site.
func TestVendorSimChaosKnobs(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sites.json")
	addr, stderr, stop := runVendorSim(t, "--token", "sim-token", "--seed", "7", "--5xx-rate", "1",
		"--fault-phase", "after", "--state", state)
	call := func(method, path, body string) (int, string) {
		t.Helper()
		return simCall(t, addr, method, path, body)
	}
	if code, body := call("POST", "/sites", `{"name":"Acme","domain":"acme.test"}`); code != 500 {
		t.Fatalf("create = %d %s, want 500 after the commit", code, body)
	}
	_, stats := call("GET", "/_sim/stats", "")
	for _, want := range []string{`"POST /sites":{"500":1}`, `"creates_committed":1`, `"sites":1`} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats %s lack %s", stats, want)
		}
	}
	if code, body := call("POST", "/_sim/faults", `{}`); code != 200 || !strings.Contains(body, `"5xx_rate":1`) {
		t.Errorf("POST /_sim/faults {} = %d %s, want the faults kept", code, body)
	}
	if code, body := call("DELETE", "/_sim/faults", ""); code != 200 || !strings.Contains(body, `"5xx_rate":0`) {
		t.Errorf("DELETE /_sim/faults = %d %s, want the faults cleared", code, body)
	}
	code, listed := call("GET", "/sites?domain=acme.test", "")
	if code != 200 {
		t.Errorf("list after the faults were cleared = %d, want 200", code)
	}
	id := siteIDIn(t, listed) // the create's answer was lost: read it back
	stop()
	if !strings.Contains(stderr.String(), "seed=7") || !strings.Contains(stderr.String(), "site="+id) {
		t.Errorf("vendor-sim did not log its seed and the site:\n%s", stderr)
	}

	addr, stderr, stop = runVendorSim(t, "--token", "sim-token", "--state", state)
	defer stop()
	if _, body := call("GET", "/sites?domain=acme.test", ""); !strings.Contains(body, `"id":"`+id+`"`) {
		t.Errorf("after a restart on the state file: %s, want %s", body, id)
	}
	if !regexp.MustCompile(`seed=\d+ `).MatchString(stderr.String()) || !strings.Contains(stderr.String(), "sites=1") {
		t.Errorf("vendor-sim did not log a seed of its own and the sites it loaded:\n%s", stderr)
	}
}

// siteIDIn is the first site id in a vendor answer: ids are random.
func siteIDIn(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`"id":"(site_[a-z2-7]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no site id in %s", body)
	}
	return m[1]
}

// runVendorSim starts `licensor vendor-sim` with args on a free address and
// returns the address, its log and a stop that waits for it to end.
func runVendorSim(t *testing.T, args ...string) (string, *testkit.Buffer, func()) {
	t.Helper()
	addr := testkit.FreeAddr(t)
	stderr := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args = append([]string{"--addr", addr}, args...)
	go func() {
		done <- vendorSim(ctx, env{args: args, getenv: getenvOf(nil), stdout: &bytes.Buffer{}, stderr: stderr})
	}()
	waitListening(t, addr, done)
	stopped := false
	return addr, stderr, func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("vendor-sim returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("vendor-sim did not stop after its context was cancelled")
		}
	}
}

// waitListening polls addr until it accepts a connection, the command
// fails, or a deadline passes.
func waitListening(t *testing.T, addr string, done <-chan error) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("vendor-sim exited early: %v", err)
		default:
		}
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}, "%s accepts connections", addr)
}

// TestVendorSimSendsSignedWebhooks runs `licensor vendor-sim` with
// --webhook-url, --webhook-secret and --webhook-dup-rate 1: a suspend
// through /_sim/ reaches the receiver twice, signed with the secret, the
// paged list shows the site suspended, /_sim/stats counts the deliveries,
// and the log names the event but never the secret.
func TestVendorSimSendsSignedWebhooks(t *testing.T) {
	const secret = "whsec-console-s3cret"
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got, bodies = append(got, r), append(bodies, b)
	}))
	defer rc.Close()
	addr, stderr, stop := runVendorSim(t, "--token", "sim-token", "--seed", "5", "--webhook-url", rc.URL+"/hooks",
		"--webhook-secret", secret, "--webhook-dup-rate", "1", "--webhook-shuffle")
	defer stop()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		return simCall(t, addr, method, path, body)
	}
	code, created := call("POST", "/sites", `{"name":"Acme","domain":"acme.test"}`)
	if code != 201 {
		t.Fatalf("create = %d %s", code, created)
	}
	code, answered := call("POST", "/_sim/sites/"+siteIDIn(t, created)+"/suspend", "")
	if code != 200 || !strings.Contains(answered, `"type":"site.suspended"`) {
		t.Fatalf("suspend = %d %s", code, answered)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	}, "the receiver gets both deliveries")
	mu.Lock()
	for i, r := range got {
		if r.URL.Path != "/hooks" || r.Header.Get("Content-Type") != "application/json" || string(bodies[i]) != strings.TrimSpace(answered) {
			t.Errorf("delivery %d: %s %s %s, want the event answered", i+1, r.URL.Path, r.Header.Get("Content-Type"), bodies[i])
		}
		ts, v1, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("Vendor-Signature"), "t="), ",v1=")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(bodies[i])))
		if v1 != hex.EncodeToString(mac.Sum(nil)) {
			t.Errorf("delivery %d: Vendor-Signature %q does not verify", i+1, r.Header.Get("Vendor-Signature"))
		}
	}
	mu.Unlock()

	// The simulator counts a delivery once its answer is back, a moment
	// after the receiver got it: wait for the counts to settle.
	var stats string
	var st struct {
		Webhooks map[string]int `json:"webhooks"`
	}
	settled := testkit.Poll(10*time.Second, func() bool {
		_, stats = call("GET", "/_sim/stats", "")
		return json.Unmarshal([]byte(stats), &st) == nil && st.Webhooks["pending"] == 0
	})
	if !settled || st.Webhooks["delivered"] != 2 || st.Webhooks["sent"] != 2 || st.Webhooks["pending"] != 0 {
		t.Errorf("stats %s, want 2 webhooks sent and delivered", stats)
	}
	if _, list := call("GET", "/sites?page=1&per_page=1", ""); !strings.Contains(list, `"status":"suspended"`) ||
		!strings.Contains(list, `"meta":{"page":1,"per_page":1,"total":1}`) {
		t.Errorf("paged list %s, want the site suspended and the meta", list)
	}
	stop()
	log := stderr.String()
	if !strings.Contains(log, "event=evt_") || !strings.Contains(log, "webhook_url=http://") || strings.Contains(log, secret) {
		t.Errorf("vendor-sim log: want the event and the URL, never the secret:\n%s", log)
	}
}

// simCall sends one request to the simulator at addr with its test token
// and returns the status and body.
func simCall(t *testing.T, addr, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sim-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
