package vendorsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/vendorsim"
)

// sink is a ResponseWriter that records what was answered; status 0 is no
// answer at all (a dropped one).
type sink struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (s *sink) Header() http.Header {
	if s.header == nil {
		s.header = http.Header{}
	}
	return s.header
}

func (s *sink) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func (s *sink) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return s.body.Write(b)
}

// doneCtx is already over: a request on it that the simulator holds (drop
// mode hang) returns at once, unanswered.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// ask sends one request straight to the simulator's handler, with the
// token when one is given.
func ask(sim *vendorsim.Simulator, method, target, body, token string) *sink {
	r := httptest.NewRequestWithContext(doneCtx, method, target, strings.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := &sink{}
	sim.ServeHTTP(w, r)
	return w
}

func newSim(t *testing.T, opts vendorsim.SimOptions) *vendorsim.Simulator {
	t.Helper()
	sim, err := vendorsim.NewSimulator(opts)
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// siteIDs remembers the id of each domain's site a simulator has held, so
// that a step names a site by its domain ("{acme.test}"), a deleted one
// too: ids are random, never site_1, site_2, ….
type siteIDs struct {
	sim  *vendorsim.Simulator
	seen map[string]string // lower-cased domain → its latest site's id
}

func newSiteIDs(sim *vendorsim.Simulator) *siteIDs {
	return &siteIDs{sim: sim, seen: map[string]string{}}
}

// expand replaces each "{domain}" in text with the id of the domain's
// site, now or last.
func (s *siteIDs) expand(text string) string {
	for _, site := range s.sim.Sites() {
		s.seen[strings.ToLower(site.Domain)] = site.ID
	}
	for d, id := range s.seen {
		text = strings.ReplaceAll(text, "{"+d+"}", id)
	}
	return text
}

// createdID is the id in a POST /sites answer.
func createdID(t *testing.T, w *sink) string {
	t.Helper()
	var created struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(w.body.Bytes(), &created); err != nil || !strings.HasPrefix(created.Data.ID, "site_") {
		t.Fatalf("create answered %d %s, want a site_ id", w.status, w.body.String())
	}
	return created.Data.ID
}

func createBody(domain string) string { return `{"name":"Acme","domain":"` + domain + `"}` }

// statsOf reads GET /_sim/stats as a client would.
func statsOf(t *testing.T, sim *vendorsim.Simulator, token string) vendorsim.SimStats {
	t.Helper()
	w := ask(sim, http.MethodGet, "/_sim/stats", "", token)
	if w.status != http.StatusOK {
		t.Fatalf("GET /_sim/stats = %d %s", w.status, w.body.String())
	}
	var st vendorsim.SimStats
	if err := json.Unmarshal(w.body.Bytes(), &st); err != nil {
		t.Fatalf("GET /_sim/stats: %v in %s", err, w.body.String())
	}
	return st
}

// TestSimStatsCountByRouteAndStatus: every answer is counted under its route
// and status, a dropped one under "dropped"; creates and deletes committed,
// duplicates refused and the sites held are counted too. A request with the
// wrong token sees no stats.
func TestSimStatsCountByRouteAndStatus(t *testing.T) {
	const token = "sim-token"
	sim := newSim(t, vendorsim.SimOptions{Token: token,
		SimFaults: vendorsim.SimFaults{Burst429: 1, DropDeletes: 1, DropMode: vendorsim.DropHang}})
	ids := newSiteIDs(sim)
	for _, step := range []struct {
		method, target, body, token string
		want                        int
	}{
		{"GET", "/sites?domain=acme.test", "", token, 429}, // the burst
		{"GET", "/sites?domain=acme.test", "", token, 200},
		{"GET", "/sites?domain=acme.test", "", "wrong", 401},
		{"POST", "/sites", createBody("acme.test"), token, 201},
		{"POST", "/sites", createBody("ACME.test"), token, 422}, // the domain has a site
		{"POST", "/sites", createBody("beta.test"), token, 201},
		{"DELETE", "/sites/{acme.test}", "", token, 0}, // committed, answer dropped
		{"DELETE", "/sites/{acme.test}", "", token, 404},
	} {
		if got := ask(sim, step.method, ids.expand(step.target), step.body, step.token); got.status != step.want {
			t.Fatalf("%s %s = %d %s, want %d", step.method, step.target, got.status, got.body.String(), step.want)
		}
	}
	want := vendorsim.SimStats{
		Calls: map[string]map[string]int{
			"GET /sites":                  {"429": 1, "200": 1, "401": 1},
			"POST /sites":                 {"201": 2, "422": 1},
			"DELETE /sites/{id}":          {"dropped": 1, "404": 1},
			"POST /sites/{id}/rotate-key": {},
		},
		CreatesCommitted: 2, DuplicatesRefused: 1, DeletesCommitted: 1, Sites: 1, Dropped: 1,
	}
	if got := statsOf(t, sim, token); !reflect.DeepEqual(got, want) {
		t.Errorf("stats = %+v\nwant    %+v", got, want)
	}
	if w := ask(sim, http.MethodGet, "/_sim/stats", "", "wrong"); w.status != http.StatusUnauthorized {
		t.Errorf("GET /_sim/stats with the wrong token = %d, want 401", w.status)
	}
	// The wire shape, as a harness reads it.
	raw := ask(sim, http.MethodGet, "/_sim/stats", "", token).body.String()
	for _, key := range []string{`"calls":{`, `"GET /sites":{`, `"creates_committed":2`, `"duplicates_refused":1`,
		`"deletes_committed":1`, `"sites":1`, `"dropped":1`} {
		if !strings.Contains(raw, key) {
			t.Errorf("stats JSON lacks %s: %s", key, raw)
		}
	}
}

// TestSimFaultsReplacedAtRuntime: POST /_sim/faults sets the knobs it is
// given (the others stay in force) and answers those in force; they take
// effect on the next request; a body it cannot take changes nothing; the
// /_sim/ routes suffer no fault.
func TestSimFaultsReplacedAtRuntime(t *testing.T) {
	sim := newSim(t, vendorsim.SimOptions{Seed: 3})
	get := func() *sink { return ask(sim, http.MethodGet, "/sites?domain=acme.test", "", "") }
	if got := get().status; got != 200 {
		t.Fatalf("before any fault: %d", got)
	}

	w := ask(sim, http.MethodPost, "/_sim/faults", `{"5xx_rate":1,"latency":"0s"}`, "")
	if w.status != 200 {
		t.Fatalf("POST /_sim/faults = %d %s", w.status, w.body.String())
	}
	var now map[string]any
	if err := json.Unmarshal(w.body.Bytes(), &now); err != nil {
		t.Fatal(err)
	}
	// retry_after stays the 0 the simulator started with: a knob left out is kept.
	want := map[string]any{"latency": "0s", "jitter": "0s", "429_burst": 0.0, "retry_after": 0.0, "429_rate": 0.0,
		"5xx_rate": 1.0, "drop_rate": 0.0, "drop_creates": 0.0, "drop_deletes": 0.0, "drop_mode": "hang",
		"fault_phase": "before", "seed": 3.0}
	if !reflect.DeepEqual(now, want) {
		t.Errorf("faults in force = %v\nwant %v", now, want)
	}
	if got := get().status; got != 500 {
		t.Errorf("with 5xx_rate 1: %d, want 500", got)
	}
	if got := ask(sim, http.MethodGet, "/_sim/stats", "", "").status; got != 200 {
		t.Errorf("GET /_sim/stats under 5xx_rate 1 = %d, want 200: /_sim/ suffers no fault", got)
	}

	ask(sim, http.MethodPost, "/_sim/faults", `{"429_burst":1,"retry_after":3}`, "")
	w = get()
	if w.status != 429 || w.Header().Get("Retry-After") != "3" {
		t.Errorf("with a 429 burst of 1: %d Retry-After %q, want 429 and 3", w.status, w.Header().Get("Retry-After"))
	}
	if got := get().status; got != 500 {
		t.Errorf("after the burst, the 5xx rate left out (still in force): %d, want 500", got)
	}

	before := ask(sim, http.MethodGet, "/_sim/faults", "", "").body.String()
	for body, status := range map[string]int{`{"5xx_rate":2}`: 422, `{"drop_mode":"explode"}`: 422,
		`{"latency":"soon"}`: 422, `{"bogus":1}`: 400, `{"5xx_rate":`: 400} {
		if got := ask(sim, http.MethodPost, "/_sim/faults", body, "").status; got != status {
			t.Errorf("POST /_sim/faults %s = %d, want %d", body, got, status)
		}
	}
	if after := ask(sim, http.MethodGet, "/_sim/faults", "", "").body.String(); after != before {
		t.Errorf("a refused body changed the faults:\n%s\nwas\n%s", after, before)
	}
}

// TestSimFaultsMergeAndClear: POST /_sim/faults merges the knobs it is
// given into the faults in force (a knob left out keeps its value, {}
// changes nothing), and DELETE /_sim/faults clears every knob to its
// default, no fault, leaving the seed as it is.
func TestSimFaultsMergeAndClear(t *testing.T) {
	sim := newSim(t, vendorsim.SimOptions{Seed: 5, SimFaults: vendorsim.SimFaults{Latency: 10 * time.Millisecond, Rate5xx: 0.25,
		RetryAfter: 2 * time.Second, DropMode: vendorsim.DropClose}})
	faults := func(method, body string) map[string]any {
		t.Helper()
		w := ask(sim, method, "/_sim/faults", body, "")
		var got map[string]any
		if err := json.Unmarshal(w.body.Bytes(), &got); w.status != 200 || err != nil {
			t.Fatalf("%s /_sim/faults %s = %d %s: %v", method, body, w.status, w.body.String(), err)
		}
		return got
	}
	started := faults(http.MethodGet, "")
	if got := faults(http.MethodPost, `{}`); !reflect.DeepEqual(got, started) {
		t.Errorf("POST {} changed the faults:\n%v\nwere\n%v", got, started)
	}
	want := maps.Clone(started)
	want["429_rate"], want["fault_phase"] = 0.5, "after"
	if got := faults(http.MethodPost, `{"429_rate":0.5,"fault_phase":"after"}`); !reflect.DeepEqual(got, want) {
		t.Errorf("POST of two knobs = %v\nwant the others kept: %v", got, want)
	}
	if got := faults(http.MethodGet, ""); !reflect.DeepEqual(got, want) {
		t.Errorf("GET after the merge = %v, want %v", got, want)
	}
	cleared := map[string]any{"latency": "0s", "jitter": "0s", "429_burst": 0.0, "retry_after": 1.0, "429_rate": 0.0,
		"5xx_rate": 0.0, "drop_rate": 0.0, "drop_creates": 0.0, "drop_deletes": 0.0, "drop_mode": "hang",
		"fault_phase": "before", "seed": 5.0}
	if got := faults(http.MethodDelete, ""); !reflect.DeepEqual(got, cleared) {
		t.Errorf("DELETE /_sim/faults = %v\nwant every knob at its default: %v", got, cleared)
	}
	if got := faults(http.MethodGet, ""); !reflect.DeepEqual(got, cleared) {
		t.Errorf("GET after DELETE = %v, want %v", got, cleared)
	}
	for range 20 {
		if got := ask(sim, http.MethodGet, "/sites", "", "").status; got != 200 {
			t.Fatalf("a call after DELETE /_sim/faults = %d, want 200: no fault", got)
		}
	}
}

// TestSimReset: POST /_sim/reset forgets the sites and zeroes the stats;
// the faults stay, and their random sequence starts over; ids are not given
// twice.
func TestSimReset(t *testing.T) {
	sim := newSim(t, vendorsim.SimOptions{Seed: 11, SimFaults: vendorsim.SimFaults{Rate5xx: 0.5}})
	statuses := func() []int {
		var got []int
		for range 20 {
			got = append(got, ask(sim, http.MethodGet, "/sites", "", "").status)
		}
		return got
	}
	first := statuses()
	ask(sim, http.MethodDelete, "/_sim/faults", "", "")
	ask(sim, http.MethodPost, "/_sim/faults", `{"seed":11}`, "") // no faults, the sequence from the start
	for _, d := range []string{"a.test", "b.test"} {
		if got := ask(sim, http.MethodPost, "/sites", createBody(d), "").status; got != 201 {
			t.Fatalf("create %s = %d", d, got)
		}
	}
	given := []string{idOf(t, sim, "a.test"), idOf(t, sim, "b.test")}
	ask(sim, http.MethodPost, "/_sim/faults", `{"5xx_rate":0.5}`, "")
	faults := ask(sim, http.MethodGet, "/_sim/faults", "", "").body.String()

	if w := ask(sim, http.MethodPost, "/_sim/reset", "", ""); w.status != 200 {
		t.Fatalf("POST /_sim/reset = %d %s", w.status, w.body.String())
	}
	empty := vendorsim.SimStats{Calls: map[string]map[string]int{"GET /sites": {}, "POST /sites": {}, "DELETE /sites/{id}": {},
		"POST /sites/{id}/rotate-key": {}}}
	if got := statsOf(t, sim, ""); !reflect.DeepEqual(got, empty) {
		t.Errorf("stats after reset = %+v, want zero", got)
	}
	if n := len(sim.Sites()); n != 0 || len(sim.Calls()) != 0 {
		t.Errorf("after reset: %d sites, calls %v; want none", n, sim.Calls())
	}
	if got := ask(sim, http.MethodGet, "/_sim/faults", "", "").body.String(); got != faults {
		t.Errorf("reset changed the faults: %s, was %s", got, faults)
	}
	if again := statuses(); !reflect.DeepEqual(again, first) {
		t.Errorf("after reset the 5xx sequence is %v, want it from the seed again: %v", again, first)
	}
	ask(sim, http.MethodDelete, "/_sim/faults", "", "")
	w := ask(sim, http.MethodPost, "/sites", createBody("a.test"), "")
	if id := createdID(t, w); w.status != 201 || slices.Contains(given, id) {
		t.Errorf("create after reset = %d %s, want 201 with a new id, none of %v", w.status, w.body.String(), given)
	}
}

// TestSimRandomFaultsAreSeeded: with a seed, the 429, 5xx and drop rates
// give one sequence of faults, the same on every run, in about the
// proportions asked over 2000 requests; another seed gives another one.
func TestSimRandomFaultsAreSeeded(t *testing.T) {
	const n = 2000
	faults := vendorsim.SimFaults{Rate429: 0.1, Rate5xx: 0.2, DropRate: 0.1, DropMode: vendorsim.DropHang}
	run := func(seed uint64) ([]int, vendorsim.SimStats) {
		sim := newSim(t, vendorsim.SimOptions{Seed: seed, SimFaults: faults})
		seq := make([]int, n)
		for i := range seq {
			seq[i] = ask(sim, http.MethodGet, "/sites?domain=acme.test", "", "").status
		}
		return seq, sim.Stats()
	}
	seq, stats := run(42)
	again, _ := run(42)
	if !reflect.DeepEqual(seq, again) {
		t.Error("seed 42 gave two different fault sequences")
	}
	if other, _ := run(43); reflect.DeepEqual(seq, other) {
		t.Error("seeds 42 and 43 gave the same fault sequence")
	}

	count := map[int]int{}
	for _, s := range seq {
		count[s]++
	}
	// Precedence: 429, then 5xx, then drop, each an independent draw.
	for status, p := range map[int]float64{429: 0.1, 500: 0.9 * 0.2, 0: 0.9 * 0.8 * 0.1, 200: 0.9 * 0.8 * 0.9} {
		want, sigma := n*p, math.Sqrt(n*p*(1-p))
		if got := float64(count[status]); math.Abs(got-want) > 4*sigma {
			t.Errorf("status %d: %v of %d, want about %.0f (±%.0f)", status, got, n, want, 4*sigma)
		}
	}
	wantCalls := map[string]int{"200": count[200], "429": count[429], "500": count[500], "dropped": count[0]}
	if got := stats.Calls["GET /sites"]; !reflect.DeepEqual(got, wantCalls) || stats.Dropped != count[0] {
		t.Errorf("stats %v (dropped %d), want %v", got, stats.Dropped, wantCalls)
	}
}

// TestSim5xxAfterCommit: --drop-mode 5xx-after-commit commits the write and
// answers 500, for the drop budgets and the drop rate alike, whatever the
// fault phase.
func TestSim5xxAfterCommit(t *testing.T) {
	sim := newSim(t, vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{DropCreates: 1,
		DropMode: vendorsim.Drop5xxAfterCommit, FaultPhase: vendorsim.PhaseBefore}})
	if got := ask(sim, http.MethodPost, "/sites", createBody("acme.test"), "").status; got != 500 {
		t.Fatalf("first create = %d, want 500", got)
	}
	if sites := sim.Sites(); len(sites) != 1 || sites[0].Domain != "acme.test" {
		t.Fatalf("sites = %v, want the create committed", sites)
	}
	if got := ask(sim, http.MethodPost, "/sites", createBody("acme.test"), "").status; got != 422 {
		t.Errorf("the retry = %d, want 422: the domain has its site", got)
	}

	ask(sim, http.MethodPost, "/_sim/faults", `{"drop_rate":1,"drop_mode":"5xx-after-commit"}`, "")
	if got := ask(sim, http.MethodDelete, "/sites/"+idOf(t, sim, "acme.test"), "", "").status; got != 500 {
		t.Errorf("delete under drop_rate 1 = %d, want 500", got)
	}
	st := sim.Stats()
	if len(sim.Sites()) != 0 || st.CreatesCommitted != 1 || st.DeletesCommitted != 1 || st.DuplicatesRefused != 1 {
		t.Errorf("sites %v, stats %+v: want the delete committed, one of each", sim.Sites(), st)
	}
}

// TestSimFaultPhaseAfterCommits: a fault in the phase "after" strikes once
// the write is committed; in the phase "before" nothing is done.
func TestSimFaultPhaseAfterCommits(t *testing.T) {
	for _, tt := range []struct {
		phase     string
		wantSites int
	}{{vendorsim.PhaseAfter, 1}, {vendorsim.PhaseBefore, 0}} {
		t.Run("5xx "+tt.phase, func(t *testing.T) {
			sim := newSim(t, vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{Rate5xx: 1, FaultPhase: tt.phase}})
			if got := ask(sim, http.MethodPost, "/sites", createBody("acme.test"), "").status; got != 500 {
				t.Errorf("create = %d, want 500", got)
			}
			if got := len(sim.Sites()); got != tt.wantSites {
				t.Errorf("%d sites, want %d", got, tt.wantSites)
			}
		})
	}
	t.Run("drop after, close", func(t *testing.T) {
		sim := newSim(t, vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{DropRate: 1,
			DropMode: vendorsim.DropClose, FaultPhase: vendorsim.PhaseAfter}})
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		resp, err := http.Post(srv.URL+"/sites", "application/json", strings.NewReader(createBody("acme.test")))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("create answered %d; want the connection closed", resp.StatusCode)
		}
		if got := len(sim.Sites()); got != 1 {
			t.Errorf("%d sites, want the create committed before the answer was lost", got)
		}
		if st := sim.Stats(); st.Dropped != 1 || st.Calls["POST /sites"]["dropped"] != 1 {
			t.Errorf("stats %+v, want the drop counted", st)
		}
	})
	t.Run("random", func(t *testing.T) {
		sim := newSim(t, vendorsim.SimOptions{Seed: 5, SimFaults: vendorsim.SimFaults{Rate5xx: 1,
			FaultPhase: vendorsim.PhaseRandom}})
		for i := range 200 {
			ask(sim, http.MethodPost, "/sites", createBody("d"+strings.Repeat("x", i)+".test"), "")
		}
		if got := len(sim.Sites()); got < 70 || got > 130 {
			t.Errorf("%d of 200 creates committed, want about half", got)
		}
	})
}

// TestSimStateSurvivesRestart: with a state file, a new simulator on it
// holds the sites the last one left, ids and keys included, and gives no
// id twice; the file is replaced whole and readable by its owner alone.
func TestSimStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sites.json")
	first := newSim(t, vendorsim.SimOptions{StateFile: file})
	for _, d := range []string{"a.test", "b.test"} {
		if got := ask(first, http.MethodPost, "/sites", createBody(d), "").status; got != 201 {
			t.Fatalf("create %s = %d", d, got)
		}
	}
	given := []string{idOf(t, first, "a.test"), idOf(t, first, "b.test")}
	if got := ask(first, http.MethodDelete, "/sites/"+given[0], "", "").status; got != 204 {
		t.Fatalf("delete = %d", got)
	}
	kept := first.Sites()

	second := newSim(t, vendorsim.SimOptions{StateFile: file})
	if got := second.Sites(); !reflect.DeepEqual(got, kept) || len(got) != 1 {
		t.Fatalf("after a restart: %v, want %v", got, kept)
	}
	w := ask(second, http.MethodPost, "/sites", createBody("c.test"), "")
	if id := createdID(t, w); slices.Contains(given, id) {
		t.Errorf("create after a restart = %s, want an id none of %v", w.body.String(), given)
	}
	if w := ask(second, http.MethodPost, "/sites", createBody("B.TEST"), ""); w.status != 422 {
		t.Errorf("create of a domain the file holds = %d, want 422", w.status)
	}
	ask(second, http.MethodPost, "/_sim/reset", "", "")
	if got := newSim(t, vendorsim.SimOptions{StateFile: file}).Sites(); len(got) != 0 {
		t.Errorf("after a reset and a restart: %v, want no site", got)
	}

	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("state file mode %v, want 0600", perm)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want the state file alone (no temporary file left)", len(entries))
	}
	if err := os.WriteFile(file, []byte(`{"sites":[{"id":`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"malformed": file, "unwritable": filepath.Join(dir, "missing", "sites.json")} {
		if _, err := vendorsim.NewSimulator(vendorsim.SimOptions{StateFile: path}); !errors.Is(err, vendorsim.ErrSimState) {
			t.Errorf("NewSimulator on a %s state file = %v, want ErrSimState", name, err)
		}
	}
}

// TestSimStateUnderConcurrentWrites: the file written last holds every
// committed create, however they interleave.
func TestSimStateUnderConcurrentWrites(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sites.json")
	sim := newSim(t, vendorsim.SimOptions{StateFile: file})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { ask(sim, http.MethodPost, "/sites", createBody(string(rune('a'+i))+".test"), "") })
	}
	wg.Wait()
	if got := len(newSim(t, vendorsim.SimOptions{StateFile: file}).Sites()); got != 16 {
		t.Errorf("the state file holds %d sites, want 16", got)
	}
}

// TestSimLogsDomainAndSiteNeverToken: each vendor request's log line names
// its domain, and its site id once known; no line holds a token or a
// license key.
func TestSimLogsDomainAndSiteNeverToken(t *testing.T) {
	const token, wrong = "s3cret-sim-token", "wr0ng-token"
	var buf bytes.Buffer
	sim := newSim(t, vendorsim.SimOptions{Token: token, Log: slog.New(slog.NewTextHandler(&buf, nil)),
		SimFaults: vendorsim.SimFaults{DropDeletes: 1, Burst429: 1}})
	ids := newSiteIDs(sim)
	for _, step := range []struct {
		method, target, body, token string
		want                        []string
	}{
		{"GET", "/sites?domain=acme.test", "", token, []string{"domain=acme.test", "status=429"}},
		{"GET", "/sites?domain=acme.test", "", token, []string{"domain=acme.test", "status=200"}},
		{"POST", "/sites", createBody("acme.test"), wrong, []string{"domain=acme.test", "status=401"}},
		{"POST", "/sites", createBody("acme.test"), token, []string{"domain=acme.test", "site={acme.test}", "status=201"}},
		{"GET", "/sites?domain=acme.test", "", token, []string{"domain=acme.test", "site={acme.test}", "status=200"}},
		{"POST", "/sites", createBody("acme.test"), token, []string{"domain=acme.test", "site={acme.test}", "status=422"}},
		{"DELETE", "/sites/{acme.test}", "", token, []string{"domain=acme.test", "site={acme.test}", `fault="deleted, answer dropped: hang"`}},
		{"DELETE", "/sites/{acme.test}", "", token, []string{"site={acme.test}", "status=404"}},
		{"POST", "/sites", createBody("acme.test"), token, []string{"domain=acme.test", "site={acme.test}", "status=201"}},
		{"POST", "/_sim/faults", `{"429_rate":1}`, token, []string{`msg="vendor-sim: faults replaced"`}},
		{"GET", "/sites?domain=acme.test", "", token, []string{"domain=acme.test", "site={acme.test}", "status=429"}}, // known before the work
	} {
		buf.Reset()
		ask(sim, step.method, ids.expand(step.target), step.body, step.token)
		line := buf.String()
		if strings.Count(line, "\n") != 1 {
			t.Errorf("%s %s logged %q, want one line", step.method, step.target, line)
		}
		for _, want := range step.want {
			if want = ids.expand(want); !strings.Contains(line, want) { // after the step: a create's id is known
				t.Errorf("%s %s logged %q, want %s in it", step.method, step.target, line, want)
			}
		}
		for _, secret := range []string{token, wrong, "LK-", "Bearer"} {
			if strings.Contains(line, secret) {
				t.Errorf("%s %s logged %q", step.method, step.target, secret)
			}
		}
	}
}
