package tests

// The history checker: real `licensor serve` processes on one database and
// a `licensor vendor-sim` with faults, seeded traffic of several consumers
// over a few domains while a seeded schedule kills, stops and restarts
// the processes and cuts their database connections; every operation's
// call, return and answer is recorded and the history is checked for
// linearizability against the model of robust_model_test.go with porcupine,
// then the invariants that hold once everything settled are checked
// (robust_invariants_test.go). Modelled on etcd's tests/robustness.
//
//	go test ./tests -run TestRobustHistory -count=1 -v                          # the CI run
//	go test ./tests -run TestRobustHistory/mysql -robust.duration=30m -timeout=2h -v   # longer
//	go test ./tests -run TestRobustHistory/mysql -robust.seed=N -v                # a seed again

import (
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

var (
	robustDuration = flag.Duration("robust.duration", 0, "how long the history checker sends traffic (0: its CI budget)")
	robustSeed     = flag.Uint64("robust.seed", 725183, "the seed of the history checker's traffic and faults (0: drawn from the clock, to explore)")
	robustOut      = flag.String("robust.out", "", "the directory the history checker writes its visualizations to (default: the system's temporary directory)")
)

// robustNever is the return of an operation whose answer never came and
// whose process lived on: it may take effect at any time.
const robustNever = int64(math.MaxInt64 / 2)

// TestRobustHistory runs the history checker: on MariaDB two serves share
// the database (about a minute of traffic with faults in CI), on SQLite one
// serve (a shorter run). A failed check prints its seed and the path of
// porcupine's visualization of the history.
func TestRobustHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for a minute")
	}
	t.Parallel()
	seed := *robustSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) % 1_000_000
	}
	for _, dialect := range []string{database.MySQL, database.SQLite} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t, dialect)
			serves, traffic := 2, 45*time.Second
			if dialect == database.SQLite {
				serves, traffic = 1, 20*time.Second
			}
			if *robustDuration > 0 {
				traffic = *robustDuration
			}
			t.Logf("seed %d (replay: -robust.seed=%d), %s of traffic on %d serve(s)", seed, seed, traffic, serves)
			r := newRobustRun(t, db, seed, serves)
			r.run(traffic)
			r.settle()
			r.observeFinal()
			r.check()
			r.invariants()
			r.report()
		})
	}
}

// check checks the history for linearizability; on a violation it writes
// porcupine's visualization and fails naming it and the seed.
func (r *robustRun) check() {
	r.t.Helper()
	r.resolveVendorDeletes()
	r.resolveReservations()
	ops := r.history()
	began := time.Now()
	timeout := time.Minute // past it the history is neither proved nor refuted (logged), so go test ./... keeps its 10 minutes
	if *robustDuration > 10*time.Minute {
		timeout = *robustDuration / 2
	}
	res, info := porcupine.CheckOperationsVerbose(robustModel, ops, timeout)
	r.stats.checkTime = time.Since(began)
	r.stats.partitions = len(robustModel.Partition(ops))
	r.stats.ops = len(ops)
	r.stats.result = string(res)
	switch res {
	case porcupine.Ok:
		if *robustOut != "" {
			r.visualize(info, "ok")
		}
	case porcupine.Unknown:
		r.t.Logf("the linearizability check timed out after %s (seed %d): the history is neither proved nor refuted", timeout, r.seed)
	default:
		path := r.visualize(info, "violation")
		r.t.Errorf("the history of seed %d is not linearizable: see %s (replay: -robust.seed=%d)", r.seed, path, r.seed)
	}
}

// visualize writes porcupine's visualization of the history and returns
// its path.
func (r *robustRun) visualize(info porcupine.LinearizationInfo, what string) string {
	dir := *robustOut
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("robust-%s-%s-seed%d-%s.html", filepath.Base(r.t.Name()), r.db.Dialect, r.seed, what))
	if err := porcupine.VisualizePath(robustModel, info, path); err != nil {
		r.t.Logf("visualize: %v", err)
	}
	return path
}

// history is the recorded operations, in the order of their calls.
func (r *robustRun) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := slices.Clone(r.ops)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int {
		switch {
		case a.Call < b.Call:
			return -1
		case a.Call > b.Call:
			return 1
		}
		return 0
	})
	return ops
}

// report logs the run's figures.
func (r *robustRun) report() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t.Logf("seed %d: %d operations over %d domain partitions checked in %s (%s); answers %v; faults %v; %s",
		r.seed, r.stats.ops, r.stats.partitions, r.stats.checkTime.Round(time.Millisecond), r.stats.result,
		r.stats.answers, r.stats.faults, r.stats.notes)
}

// robustStats are a run's figures.
type robustStats struct {
	ops, partitions int
	checkTime       time.Duration
	result          string
	answers         map[string]int // "kind status" → count
	faults          map[string]int
	notes           []string
}

// robustServe is one serve of the cluster: the process running now on its
// address, and when each of its processes died (for the return of the
// requests they held).
type robustServe struct {
	mu     sync.Mutex
	addr   string
	proc   *process
	deaths []int64 // since the run began
}

// url is the serve's base URL.
func (s *robustServe) url() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr
}

// lastDeath is the last death of the serve at or before at, if one is
// after call: the request sent at call is settled by then (done, or left
// to its intent).
func (s *robustServe) lastDeath(call, at int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.deaths) - 1; i >= 0; i-- {
		if d := s.deaths[i]; d <= at {
			return d, d >= call
		}
	}
	return 0, false
}

// robustClient is the HTTP client of the traffic: a request that takes
// longer than its timeout has no answer.
var robustClient = &http.Client{Timeout: 8 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
