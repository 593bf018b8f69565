package tests

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// fleetWorkers is how many clients load the fleet at once: enough to keep
// both replicas busy through every restart, few enough for a 2-core machine.
// In each state of the fleet every client makes at least fleetRounds whole
// rounds, and each replica answers at least fleetAnswers requests.
const (
	fleetWorkers = 3
	fleetRounds  = 8
	fleetAnswers = 20
)

// TestKeyRotationFleetUnderLoad runs the documented APP_KEY rotation on two
// `serve` replicas sharing one database (MariaDB when TEST_MYSQL_DSN is set,
// else one SQLite file) while clients load both: keyed creates on one
// replica, replays of their keys and reads of their licenses on the other,
// and lists. Each step is a rolling restart (a replica drained, stopped with
// SIGTERM, started with its new environment, ready, then given traffic
// again): the new key added to APP_PREVIOUS_KEYS everywhere, then the
// switch, then `licensor keys rotate` and `licensor keys status` as
// processes, then the old key dropped. A token signed with the old key is
// used through steps 1 to 4, one signed with the new key too once step 1
// is done, and that one alone before step 5. No answer is a 5xx
// (or anything but the expected 201 or 200), requests are served in every
// state of the fleet, every license created is readable from both replicas
// at the end, and keys status counts no value under the old key.
func TestKeyRotationFleetUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	f := newFleet(t)
	oldKey, newKey := config.EncodeKey(testKey), config.EncodeKey(otherKey)
	tokenOld := f.token
	f.start(f.env(oldKey))
	// An endpoint whose signing secret is sealed under the old key, for
	// keys rotate to re-seal with the rest.
	hooks := strings.TrimSpace(runCmd(t, f.env(oldKey), "token", "issue", "--consumer", "acme", "--abilities", "webhooks:manage"))
	req, _ := http.NewRequest(http.MethodPost, f.replicas[0].url+"/api/webhook-endpoints", strings.NewReader(`{"url":"http://127.0.0.1:9/hooks"}`))
	req.Header.Set("Authorization", "Bearer "+hooks)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register an endpoint: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	load := f.load(tokenOld)
	began := time.Now()
	load.served(t, "both on the old key")

	for _, r := range f.replicas {
		f.restart(r, f.env(oldKey, newKey))
		load.served(t, "1. the new key added to APP_PREVIOUS_KEYS, "+r.name+" restarted")
	}
	// Every replica now verifies what the new key signs: a token of the
	// new key joins the old one's.
	tokenNew := issueToken(t, f.env(newKey, oldKey))
	load.setTokens(tokenOld, tokenNew)
	load.served(t, "1. tokens of both keys in use")
	for _, r := range f.replicas {
		f.restart(r, f.env(newKey, oldKey))
		load.served(t, "2. the switch (APP_KEY new, APP_PREVIOUS_KEYS old), "+r.name+" restarted")
	}

	rotated := runCmd(t, f.env(newKey, oldKey), "keys", "rotate")
	t.Logf("3. keys rotate:\n%s", rotated)
	if n := strings.Count(rotated, " checked,"); n < 5 || strings.Count(rotated, " 0 unreadable") != n { // every sealed column
		t.Errorf("keys rotate found unreadable values:\n%s", rotated)
	}
	load.served(t, "3. after keys rotate")
	st := keysStatusOf(t, f.env(newKey, oldKey))
	for _, c := range st.Columns {
		if len(c.Previous) != 1 || c.Previous[0] != 0 || c.Unreadable != 0 || c.Plaintext != 0 {
			t.Errorf("4. keys status: %s has %v under the old key, %d unreadable, %d in plaintext; want none", c.Column, c.Previous, c.Unreadable, c.Plaintext)
		}
	}
	if st.PreviousInUse || st.Columns[0].Current == 0 {
		t.Errorf("4. keys status = %+v, want values under APP_KEY only", st)
	}

	load.setTokens(tokenNew) // the old key's tokens end at step 5
	load.served(t, "4. tokens of the new key alone in use")
	for _, r := range f.replicas {
		f.restart(r, f.env(newKey))
		load.served(t, fmt.Sprintf("5. the old key dropped, %s restarted", r.name))
	}
	created := load.stop()
	t.Logf("rotated under load in %s: %s", time.Since(began).Round(time.Millisecond), load.summary())

	if n := load.serverErrors.Load(); n != 0 {
		t.Errorf("%d answers were 5xx", n)
	}
	if bad := load.unexpected(); len(bad) > 0 {
		t.Errorf("%d unexpected answers, the first: %s", load.bad.Load(), strings.Join(bad, "\n"))
	}
	f.wantReadable(t, tokenNew, created)
	for _, c := range keysStatusOf(t, f.env(newKey)).Columns {
		if c.Unreadable != 0 || c.Plaintext != 0 || c.Current == 0 {
			t.Errorf("keys status on the new key alone: %s has %d unreadable, %d in plaintext, %d under APP_KEY", c.Column, c.Unreadable, c.Plaintext, c.Current)
		}
	}
	f.wantCleanLogs(t, created, oldKey, newKey)
}

// TestKeyRotationOutOfOrderAnswers503 is the control: switching one replica
// to the new key while the other holds only the old one (the procedure
// without its first step). The old replica answers 503 key_unavailable
// with Retry-After, never a 500, for what the switched one wrote (the
// license, the replay of its create), and tells the cause once in its log;
// given the new key as a previous key, it answers them.
func TestKeyRotationOutOfOrderAnswers503(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	f := newFleet(t)
	oldKey, newKey := config.EncodeKey(testKey), config.EncodeKey(otherKey)
	token := f.token
	f.start(f.env(oldKey))
	switched, old := f.replicas[0], f.replicas[1]
	f.restart(switched, f.env(newKey, oldKey))

	code, _, first := send(switched.url+"/api/licenses", http.MethodPost, token, "out-of-order-1", licenseBody("out-of-order.test"))
	if code != http.StatusCreated {
		t.Fatalf("create on the switched replica = %d %s", code, first)
	}
	var lic struct {
		Data struct {
			ID         string `json:"id"`
			LicenseKey string `json:"license_key"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(first), &lic); err != nil || lic.Data.ID == "" {
		t.Fatalf("create answered %s: %v", first, err)
	}
	reads := []struct{ method, path, key, body string }{
		{http.MethodGet, "/api/licenses/" + lic.Data.ID, "", ""},
		{http.MethodPost, "/api/licenses", "out-of-order-1", licenseBody("out-of-order.test")},
		{http.MethodGet, "/api/licenses", "", ""},
	}
	for range 3 {
		for _, r := range reads {
			code, h, body := send(old.url+r.path, r.method, token, r.key, r.body)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"key_unavailable"`) || h.Get("Retry-After") == "" {
				t.Errorf("%s %s on the old replica = %d (Retry-After %q) %s, want 503 key_unavailable with Retry-After", r.method, r.path, code, h.Get("Retry-After"), body)
			}
			if strings.Contains(body, lic.Data.LicenseKey) {
				t.Errorf("the answer shows the license key: %s", body)
			}
		}
	}
	// The line is written before the first answer, and reaches the test
	// through the process's pipe a moment later.
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(old.proc.output.String(), keyWarningLine) },
		"the old replica tells the cause")
	if n := strings.Count(old.proc.output.String(), keyWarningLine); n != 1 {
		t.Errorf("the old replica told the cause %d times after %d refused requests, want once:\n%s", n, 3*len(reads), old.proc.output.String())
	}
	if strings.Contains(old.proc.output.String(), lic.Data.LicenseKey) {
		t.Error("the license key reached the old replica's log")
	}

	f.restart(old, f.env(oldKey, newKey)) // what step 1 would have given it
	if code, _, body := send(old.url+"/api/licenses/"+lic.Data.ID, http.MethodGet, token, "", ""); code != http.StatusOK || !strings.Contains(body, lic.Data.LicenseKey) {
		t.Errorf("with the new key as a previous key: GET = %d %s", code, body)
	}
	if code, h, body := send(old.url+"/api/licenses", http.MethodPost, token, "out-of-order-1", licenseBody("out-of-order.test")); code != http.StatusCreated ||
		body != first || h.Get("Idempotent-Replayed") != "true" {
		t.Errorf("with the new key as a previous key: replay = %d %s, want the first 201", code, body)
	}
}

// fleet is two `serve` replicas on one database, behind the test's own
// balancer: a request goes to a replica only while it is up, and a replica
// is drained (no request in flight) before it is stopped.
type fleet struct {
	t        *testing.T
	base     []string // the environment without APP_KEY and APP_PREVIOUS_KEYS
	token    string   // acme's, issued under the old key (testKey)
	replicas []*fleetReplica
	procs    []*process // every serve started, for their logs
}

// fleetReplica is one replica: its current process and address.
type fleetReplica struct {
	name string
	mu   sync.RWMutex // read-held by each request sent to it, write-held to drain it
	up   bool
	url  string
	proc *process
	// answered counts the requests it answered, to tell it serves.
	answered atomic.Int64
}

// newFleet makes the database (MariaDB when TEST_MYSQL_DSN is set, else a
// SQLite file), a vendor simulator and a token; no replica runs yet.
func newFleet(t *testing.T) *fleet {
	dialect := database.SQLite
	if os.Getenv("TEST_MYSQL_DSN") != "" {
		dialect = database.MySQL
	}
	r := newFaultRig(t, testdb.New(t, dialect), nil, "RECONCILE_INTERVAL=1h", "APP_SHUTDOWN_TIMEOUT=10s", "WEBHOOK_ALLOW_PRIVATE=true")
	return &fleet{t: t, base: r.env, token: r.token, replicas: []*fleetReplica{{name: "replica 1"}, {name: "replica 2"}}}
}

// env is the fleet's environment under APP_KEY key and APP_PREVIOUS_KEYS
// previous.
func (f *fleet) env(key string, previous ...string) []string {
	return append(slices.Clone(f.base), "APP_KEY="+key, "APP_PREVIOUS_KEYS="+strings.Join(previous, ","))
}

// start starts every replica on env.
func (f *fleet) start(env []string) {
	for _, r := range f.replicas {
		f.run(r, env)
	}
}

// run starts r's serve on a free address and gives it traffic once ready.
func (f *fleet) run(r *fleetReplica, env []string) {
	f.t.Helper()
	addr := testkit.FreeAddr(f.t)
	p := start(f.t, append(slices.Clone(env), "APP_ADDR="+addr), "serve")
	f.procs = append(f.procs, p)
	waitFor(f.t, "http://"+addr+"/readyz", "", http.StatusOK)
	r.mu.Lock()
	r.proc, r.url, r.up = p, "http://"+addr, true
	r.mu.Unlock()
}

// restart is one replica's turn in a rolling restart: drained (Lock waits
// for the requests in flight to it), stopped gracefully (SIGTERM, exit 0),
// started with env, and given traffic again once ready.
func (f *fleet) restart(r *fleetReplica, env []string) {
	f.t.Helper()
	r.mu.Lock()
	r.up = false
	r.mu.Unlock()
	// Drained: close the clients' idle connections too, as a balancer
	// does, or a connection dialled and never used holds the shutdown up
	// for 5 s (net/http waits that long for a connection with no request).
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if err := r.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		f.t.Fatal(err)
	}
	if err := r.proc.cmd.Wait(); err != nil {
		f.t.Fatalf("%s did not exit 0 on SIGTERM: %v\n%s", r.name, err, r.proc.output.String())
	}
	f.run(r, env)
}

// fleetLicense is a license a create was answered with.
type fleetLicense struct {
	id, key string
}

// fleetLoad is the clients: fleetWorkers goroutines, each making a keyed
// create on one replica, then on the other the replay of its key and a
// read of its license, then a list, over and over.
type fleetLoad struct {
	f        *fleet
	stopping chan struct{}
	wg       sync.WaitGroup

	mu       sync.Mutex
	current  []string       // the tokens the clients use, in turn
	byAnswer map[string]int // "operation status" → how many
	firstBad []string
	created  []fleetLicense

	rounds       [fleetWorkers]atomic.Int64 // rounds each client completed, as expected or not
	serverErrors atomic.Int64               // answers ≥ 500
	bad          atomic.Int64               // answers other than the expected one (5xx included)
}

// load starts the clients with token.
func (f *fleet) load(token string) *fleetLoad {
	l := &fleetLoad{f: f, stopping: make(chan struct{}), current: []string{token}, byAnswer: map[string]int{}}
	for w := range fleetWorkers {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stopping:
					return
				default:
				}
				l.round(w, i)
			}
		})
	}
	return l
}

// setTokens makes the clients use tokens, in turn, from their next
// request on.
func (l *fleetLoad) setTokens(tokens ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current = tokens
}

func (l *fleetLoad) token(i int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current[i%len(l.current)]
}

// round is one create, its replay, a read of its license and a list.
func (l *fleetLoad) round(w, i int) {
	defer l.rounds[w].Add(1)
	one, other := l.f.replicas[(w+i)%2], l.f.replicas[(w+i+1)%2]
	key, domain := fmt.Sprintf("fleet-%d-%d", w, i), fmt.Sprintf("fleet-%d-%d.test", w, i)
	code, _, body, ok := l.send(one, "create", http.MethodPost, "/api/licenses", l.token(i), key, licenseBody(domain), http.StatusCreated)
	var lic struct {
		Data struct {
			ID         string `json:"id"`
			LicenseKey string `json:"license_key"`
		} `json:"data"`
	}
	if !ok || json.Unmarshal([]byte(body), &lic) != nil || lic.Data.ID == "" {
		if ok {
			l.unexpectedAnswer("create", code, body)
		}
		return
	}
	l.mu.Lock()
	l.created = append(l.created, fleetLicense{id: lic.Data.ID, key: lic.Data.LicenseKey})
	l.mu.Unlock()
	if _, h, replay, ok := l.send(other, "replay", http.MethodPost, "/api/licenses", l.token(i+1), key, licenseBody(domain), http.StatusCreated); ok &&
		(replay != body || h.Get("Idempotent-Replayed") != "true") {
		l.unexpectedAnswer("replay", http.StatusCreated, "another body or not marked replayed: "+replay)
	}
	if _, _, got, ok := l.send(other, "show", http.MethodGet, "/api/licenses/"+lic.Data.ID, l.token(i), "", "", http.StatusOK); ok &&
		!strings.Contains(got, `"license_key":"`+lic.Data.LicenseKey+`"`) {
		l.unexpectedAnswer("show", http.StatusOK, "another license key: "+got)
	}
	l.send(one, "list", http.MethodGet, "/api/licenses?per_page=5", l.token(i+1), "", "", http.StatusOK)
}

// send makes one request to r, or to the other replica while r is
// drained, and counts its answer; ok says it was the status wanted.
func (l *fleetLoad) send(r *fleetReplica, op, method, path, token, key, body string, want int) (int, http.Header, string, bool) {
	for _, to := range []*fleetReplica{r, l.f.other(r)} {
		to.mu.RLock()
		if !to.up {
			to.mu.RUnlock()
			continue
		}
		code, h, got := send(to.url+path, method, token, key, body)
		to.mu.RUnlock()
		to.answered.Add(1)
		l.mu.Lock()
		l.byAnswer[fmt.Sprintf("%s %d", op, code)]++
		l.mu.Unlock()
		if code >= 500 {
			l.serverErrors.Add(1)
		}
		if code != want {
			l.unexpectedAnswer(op+" on "+to.name, code, got)
			return code, h, got, false
		}
		return code, h, got, true
	}
	l.unexpectedAnswer(op, 0, "both replicas drained at once")
	return 0, nil, "", false
}

func (l *fleetLoad) unexpectedAnswer(op string, code int, body string) {
	l.bad.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.firstBad) < 10 {
		l.firstBad = append(l.firstBad, fmt.Sprintf("%s: %d %.300s", op, code, body))
	}
}

// other is the replica that is not r.
func (f *fleet) other(r *fleetReplica) *fleetReplica {
	if f.replicas[0] == r {
		return f.replicas[1]
	}
	return f.replicas[0]
}

// served waits until every client has made fleetRounds whole rounds since
// it was called (all but the first begun after it, so none still uses what
// the fleet held before) and each replica has answered fleetAnswers
// requests: the fleet serves in this state.
func (l *fleetLoad) served(t *testing.T, state string) {
	t.Helper()
	var rounds [fleetWorkers]int64
	for w := range rounds {
		rounds[w] = l.rounds[w].Load()
	}
	answered := []int64{l.f.replicas[0].answered.Load(), l.f.replicas[1].answered.Load()}
	testkit.Eventually(t, 30*time.Second, func() bool {
		for w := range rounds {
			if l.rounds[w].Load() < rounds[w]+fleetRounds { // all but the first began after the call
				return false
			}
		}
		return l.f.replicas[0].answered.Load() >= answered[0]+fleetAnswers && l.f.replicas[1].answered.Load() >= answered[1]+fleetAnswers
	}, "%s: the fleet serves", state)
	t.Logf("%s: %d rounds so far; the replicas answered %d and %d requests", state, l.totalRounds(),
		l.f.replicas[0].answered.Load(), l.f.replicas[1].answered.Load())
}

// totalRounds is how many rounds the clients completed.
func (l *fleetLoad) totalRounds() int64 {
	var n int64
	for w := range l.rounds {
		n += l.rounds[w].Load()
	}
	return n
}

// stop stops the clients, waits for their last round, and returns the
// licenses created.
func (l *fleetLoad) stop() []fleetLicense {
	close(l.stopping)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.created)
}

// unexpected are the first unexpected answers.
func (l *fleetLoad) unexpected() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.firstBad)
}

// summary counts the answers by operation and status.
func (l *fleetLoad) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l.byAnswer)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, l.byAnswer[k]))
		total += l.byAnswer[k]
	}
	return fmt.Sprintf("%d requests in %d rounds (%s), %d licenses created", total, l.totalRounds(), strings.Join(parts, ", "), len(l.created))
}

// wantReadable fails unless every license is shown, with its key, by both
// replicas.
func (f *fleet) wantReadable(t *testing.T, token string, lics []fleetLicense) {
	t.Helper()
	var wg sync.WaitGroup
	var failed atomic.Int64
	next := make(chan fleetLicense)
	for range 4 {
		wg.Go(func() {
			for lic := range next {
				for _, r := range f.replicas {
					code, _, body := send(r.url+"/api/licenses/"+lic.id, http.MethodGet, token, "", "")
					if code != http.StatusOK || !strings.Contains(body, `"license_key":"`+lic.key+`"`) {
						if failed.Add(1) <= 5 {
							t.Errorf("license %s on %s: %d %.300s", lic.id, r.name, code, body)
						}
					}
				}
			}
		})
	}
	for _, lic := range lics {
		next <- lic
	}
	close(next)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d reads of the licenses created failed", n, 2*len(lics))
	}
}

// wantCleanLogs fails when a replica's log tells of a key it lacks or an
// internal error, or holds a key or a license key (a sample of them).
func (f *fleet) wantCleanLogs(t *testing.T, lics []fleetLicense, keys ...string) {
	t.Helper()
	var secrets []string
	for _, k := range keys {
		secrets = append(secrets, strings.TrimPrefix(k, "base64:"))
	}
	for i := 0; i < len(lics); i += max(1, len(lics)/50) {
		secrets = append(secrets, lics[i].key)
	}
	for i, p := range f.procs {
		out := p.output.String()
		for _, bad := range []string{keyWarningLine, `"msg":"internal error"`} {
			if strings.Contains(out, bad) {
				t.Errorf("serve %d logged %q", i+1, bad)
			}
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("serve %d logged a secret", i+1)
			}
		}
	}
}

// keysStatusOf runs `licensor keys status --json` on env.
func keysStatusOf(t *testing.T, env []string) keyStatusJSON {
	t.Helper()
	out := runCmd(t, env, "keys", "status", "--json")
	var st keyStatusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Columns) != 5 {
		t.Fatalf("keys status --json printed %s: %v", out, err)
	}
	return st
}

// keyStatusJSON is what `licensor keys status --json` prints.
type keyStatusJSON struct {
	Keys struct {
		Current  string   `json:"current"`
		Previous []string `json:"previous"`
	} `json:"keys"`
	Columns []struct {
		Column     string `json:"column"`
		Current    int    `json:"current"`
		Previous   []int  `json:"previous"`
		Plaintext  int    `json:"plaintext"`
		Unreadable int    `json:"unreadable"`
	} `json:"columns"`
	PreviousInUse bool `json:"previous_in_use"`
}
