package tests

// The history checker's cluster: its serves, its vendor-sim (restartable
// with its sites), the consumers and their tokens, and the recording of
// each operation.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// robustConsumers are the consumers of the traffic; the first has a webhook
// endpoint.
var robustConsumers = []string{"acme", "globex", "initech"}

// robustWebhookSecret signs the simulator's webhooks to the serves.
const robustWebhookSecret = "whsec-robust"

// robustRun is one run of the history checker.
type robustRun struct {
	t       *testing.T
	db      *testdb.DB
	seed    uint64
	began   time.Time
	env     []string
	simArgs []string
	simAddr string
	serves  []*robustServe
	tokens  map[string]string // consumer → token
	domains []string
	hooks   *robustHooks

	simMu sync.Mutex // guards sim across its restarts
	sim   *faultSim

	mu       sync.Mutex
	ops      []porcupine.Operation
	nextOp   int
	keys     map[string][]robustKey         // consumer → the keys it sent
	answers  map[string][]robustAnswer      // key → its 201 answers
	seen     map[string]map[string][]string // consumer → domain → license ids answered
	deletes  []robustSiteDelete
	problems []string // broken promises seen outside the model
	stats    robustStats
}

// robustKey is a key a consumer sent, with the body it first sent.
type robustKey struct{ key, domain, name string }

// robustAnswer is a 201 a key was answered, and the request it answered.
type robustAnswer struct {
	consumer, name, domain string
	body, location         string
	replayed               bool
}

// robustSiteDelete is a site the vendor deleted on its own during the run:
// its licenses are looked up once the run is over.
type robustSiteDelete struct {
	site, domain string
	call, ret    int64
}

// newRobustRun starts the cluster: the simulator (its sites in a state
// file, its webhooks to the first serve), the serves, the tokens and
// acme's webhook endpoint.
func newRobustRun(t *testing.T, db *testdb.DB, seed uint64, serves int) *robustRun {
	t.Helper()
	r := &robustRun{t: t, db: db, seed: seed, tokens: map[string]string{},
		keys: map[string][]robustKey{}, answers: map[string][]robustAnswer{}, seen: map[string]map[string][]string{}}
	r.stats.answers, r.stats.faults = map[string]int{}, map[string]int{}
	for i := range 4 {
		r.domains = append(r.domains, fmt.Sprintf("robust-%d.test", i))
	}
	for range serves {
		r.serves = append(r.serves, &robustServe{addr: testkit.FreeAddr(t)})
	}
	r.simAddr = testkit.FreeAddr(t)
	r.simArgs = []string{"--seed", fmt.Sprint(seed), "--state", filepath.Join(t.TempDir(), "vendor.json"),
		"--latency", "5ms", "--jitter", "20ms", "--drop-rate", "0.08", "--fault-phase", "after", "--drop-mode", "hang",
		"--webhook-url", r.serves[0].url() + "/api/webhooks/vendor", "--webhook-secret", robustWebhookSecret, "--webhook-dup-rate", "0.2"}
	if err := r.startSim(); err != nil {
		t.Fatal(err)
	}
	r.env = faultEnv(t, db, "http://"+r.simAddr, append(slices.Clone(hookEnv),
		"VENDOR_TIMEOUT=1s", "VENDOR_RETRY_BASE=50ms", "VENDOR_RETRY_MAX_WAIT=1s",
		"IDEMPOTENCY_LOCK_TIMEOUT=5s", "RECONCILE_INTERVAL=500ms", "RECONCILE_SETTLE=1s",
		"APP_SHUTDOWN_TIMEOUT=2s", "VENDOR_WEBHOOK_SECRET="+robustWebhookSecret)...)
	runCmd(t, r.env, "migrate")
	for i, c := range robustConsumers {
		abilities := "licenses:read,licenses:write"
		if i == 0 {
			abilities += ",webhooks:manage"
		}
		r.tokens[c] = strings.TrimSpace(runCmd(t, r.env, "token", "issue", "--consumer", c, "--abilities", abilities))
	}
	for _, s := range r.serves {
		if err := r.startServe(s); err != nil {
			t.Fatal(err)
		}
	}
	r.hooks = newRobustHooks(t, seed)
	code, _, body := sendWith(robustClient, r.serves[0].url()+"/api/webhook-endpoints", http.MethodPost, r.tokens[robustConsumers[0]], "",
		fmt.Sprintf(`{"url":%q,"events":["license.*"]}`, r.hooks.srv.URL))
	if code != http.StatusCreated {
		t.Fatalf("POST /api/webhook-endpoints = %d %s", code, body)
	}
	r.began = time.Now()
	return r
}

// now is the time since the run began, the clock of the history.
func (r *robustRun) now() int64 { return int64(time.Since(r.began)) }

// startSim starts vendor-sim on the run's address with its state file and
// waits until it serves.
func (r *robustRun) startSim() error {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	s := &faultSim{t: r.t, addr: r.simAddr}
	s.proc = start(r.t, env, append([]string{"vendor-sim", "--addr", r.simAddr, "--token", faultSimToken}, r.simArgs...)...)
	if !testkit.Poll(20*time.Second, func() bool { return strings.Contains(s.proc.output.String(), "vendor simulator serving") }) {
		return fmt.Errorf("vendor-sim on %s never said it was serving:\n%s", r.simAddr, s.proc.output.String())
	}
	r.simMu.Lock()
	r.sim = s
	r.simMu.Unlock()
	return nil
}

// currentSim is the simulator running now.
func (r *robustRun) currentSim() *faultSim {
	r.simMu.Lock()
	defer r.simMu.Unlock()
	return r.sim
}

// startServe starts a serve on s's address and waits until it answers.
func (r *robustRun) startServe(s *robustServe) error {
	s.mu.Lock()
	addr := s.addr
	s.mu.Unlock()
	p := start(r.t, append(slices.Clone(r.env), "APP_ADDR="+addr), "serve")
	up := testkit.Poll(30*time.Second, func() bool {
		code, _, _ := sendWith(robustSimClient, "http://"+addr+"/healthz", http.MethodGet, "", "", "")
		return code == http.StatusOK || strings.Contains(p.output.String(), "address already in use")
	})
	if !up || strings.Contains(p.output.String(), "address already in use") {
		return fmt.Errorf("serve on %s did not answer in time:\n%s", addr, p.output.String())
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// simCall makes one request to the simulator; an error when it did not
// answer want.
func (r *robustRun) simCall(method, path, body string, want int) (string, error) {
	code, _, out := sendWith(robustSimClient, "http://"+r.simAddr+path, method, faultSimToken, "", body)
	if code != want {
		return out, fmt.Errorf("%s %s = %d %s", method, path, code, out)
	}
	return out, nil
}

// robustSimClient is the client of the simulator: its vendor routes may
// hold an answer (a drop) until the client gives up.
var robustSimClient = &http.Client{Timeout: 5 * time.Second}

// runLicensor runs a licensor command to its end within limit; its output
// and error (a failure is the caller's to judge: during the faults a
// command may fail).
func (r *robustRun) runLicensor(limit time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(r.t), args...)
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// record adds an operation to the history.
func (r *robustRun) record(client int, in robustInput, out robustOutput, call, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	answer := fmt.Sprint(out.Status)
	if out.Code != "" {
		answer += " " + out.Code
	}
	r.stats.answers[in.Kind+" "+answer]++
}

// opNumber is the next operation's number.
func (r *robustRun) opNumber() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextOp++
	return r.nextOp
}

// problem notes a broken promise the model does not see.
func (r *robustRun) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// note adds a line to the run's report.
func (r *robustRun) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.notes = append(r.stats.notes, fmt.Sprintf(format, args...))
}

// robustHooks is acme's webhook endpoint: it answers 500 to a seeded part
// of the deliveries (which are then retried) and notes every event id it
// answered 2xx.
type robustHooks struct {
	srv       *httptest.Server
	mu        sync.Mutex
	n         uint64
	seed      uint64
	delivered map[string]int
}

func newRobustHooks(t *testing.T, seed uint64) *robustHooks {
	h := &robustHooks{seed: seed, delivered: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var e struct{ ID string }
		_ = json.Unmarshal(body, &e)
		h.mu.Lock()
		h.n++
		fail := (h.n*2654435761+h.seed)%10 == 0 // one in ten, by the seed
		if !fail {
			h.delivered[e.ID]++
		}
		h.mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// got reports whether the event was delivered at least once.
func (h *robustHooks) got(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.delivered[id] > 0
}

// isMySQL reports whether the run's database is MariaDB.
func (r *robustRun) isMySQL() bool { return r.db.Dialect == database.MySQL }
