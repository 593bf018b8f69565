package sim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var (
	simCases  = flag.Int("sim.cases", 1000, "sim: cases TestSim runs")
	simSeed   = flag.Uint64("sim.seed", 1, "sim: the first case's seed (0: one from the clock, to explore); -sim.cases=1 -sim.seed=S replays seed S")
	simStrict = flag.Bool("sim.strict", false, "sim: known bugs of today's code fail the case too")
	simOut    = flag.String("sim.out", "", "sim: directory a failing case's history is written to (default: the test's temporary directory, or $SIM_OUT)")
)

// caseTimeout is how long a case may run in real time before it counts
// as hung (a case takes milliseconds).
const caseTimeout = 2 * time.Minute

// gcPercent is the garbage collector's GOGC: a case makes a lot of
// short-lived garbage, but much more than the default lets each case's
// sync.Pools (Echo's, each app's own) pile up between collections.
var gcPercent = 200

// TestMain runs the tests with a lazier garbage collector (gcPercent).
func TestMain(m *testing.M) {
	if underRace {
		fmt.Println("tests/sim: not run under -race (see race_test.go)")
		os.Exit(0)
	}
	debug.SetGCPercent(gcPercent)
	code := m.Run()
	if tmplDir != "" {
		_ = os.RemoveAll(tmplDir)
	}
	os.Exit(code)
}

// TestSim runs -sim.cases plans drawn from seeded PCG sources, one case per
// seed, on every core; a case that breaks an invariant is shrunk (whole
// operations dropped while it still fails) and reported with its seed, its
// shrunk plan and its history.
func TestSim(t *testing.T) {
	seed := *simSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := *simCases
	// Twice the cores: a case waits on its files now and then.
	workers := min(2*runtime.GOMAXPROCS(0), n)
	var next, known atomic.Int64
	var failed atomic.Bool
	var mu sync.Mutex
	first := -1
	start := time.Now()
	t.Logf("seeds %d to %d", seed, seed+uint64(n)-1)
	t.Run("cases", func(t *testing.T) {
		for i := 0; i < workers; i++ {
			t.Run(fmt.Sprintf("worker%d", i), func(t *testing.T) {
				t.Parallel()
				for !failed.Load() {
					c := int(next.Add(1)) - 1
					if c >= n {
						return
					}
					s := seed + uint64(c)
					p := genPlan(newPCG(s))
					// A case that hangs (a goroutine blocked where synctest
					// cannot see it, so the bubble never settles) names its
					// seed rather than wait for the test's timeout.
					watchdog := time.AfterFunc(caseTimeout, func() {
						panic(fmt.Sprintf("sim: seed %d ran for %s of real time: a hang; replay: -run 'TestSim$' -sim.cases=1 -sim.seed=%d", s, caseTimeout, s))
					})
					res := runPlan(t, p)
					watchdog.Stop()
					if len(res.Known) > 0 && known.Add(1) == 1 {
						t.Logf("seed %d: %s (first of the cases that met a known bug; -sim.strict fails them)", s, res.Known[0])
					}
					if res.failed() {
						mu.Lock()
						if first < 0 || c < first {
							first = c
						}
						mu.Unlock()
						failed.Store(true)
						report(t, s, c, time.Since(start), p, res)
						return
					}
				}
			})
		}
	})
	done := min(int(next.Load()), n)
	el := time.Since(start)
	t.Logf("%d cases in %s: %.1f cases/s; %d met a known bug", done, el.Round(time.Millisecond), float64(done)/el.Seconds(), known.Load())
}

// report shrinks a failing plan and fails the test with the seed, the
// shrunk plan and its history, written to a file too.
func report(t *testing.T, seed uint64, c int, after time.Duration, p plan, res result) {
	t.Helper()
	small, sres := shrink(t, p, res)
	dir := *simOut
	if dir == "" {
		dir = os.Getenv("SIM_OUT")
	}
	if dir == "" {
		dir = t.TempDir()
	}
	file := filepath.Join(dir, fmt.Sprintf("sim-seed-%d.txt", seed))
	text := fmt.Sprintf("seed %d (case %d, found after %s)\n\nviolations:\n  %s\n\nshrunk plan (%d of %d operations):\n%s\nhistory of the shrunk plan:\n%s\nviolations of the shrunk plan:\n  %s\n\nfull plan:\n%s\nhistory of the full plan:\n%s",
		seed, c, after.Round(time.Millisecond), strings.Join(res.Violations, "\n  "), len(small.Ops), len(p.Ops), small, sres.History,
		strings.Join(sres.Violations, "\n  "), p, res.History)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(file, []byte(text), 0o644)
	}
	t.Errorf("seed %d (case %d, after %s) broke an invariant; replay: go test ./tests/sim -run 'TestSim$' -sim.cases=1 -sim.seed=%d\n%s\nshrunk plan (%d operations):\n%s\nhistory:\n%s\nwritten to %s",
		seed, c, after.Round(time.Millisecond), seed, strings.Join(sres.Violations, "\n"), len(small.Ops), small, sres.History, file)
}

// shrink drops operations (halves, then quarters, …, then one at a time)
// and vendor faults while the plan still breaks an invariant.
func shrink(t *testing.T, p plan, res result) (plan, result) {
	deadline := time.Now().Add(time.Minute)
	try := func(q plan) bool {
		if time.Now().After(deadline) {
			return false
		}
		if r := runPlan(t, q); r.failed() {
			p, res = q, r
			return true
		}
		return false
	}
	for chunk := len(p.Ops) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(p.Ops); {
			q := plan{Faults: p.Faults, Ops: append(append([]op{}, p.Ops[:i]...), p.Ops[i+chunk:]...)}
			if !try(q) {
				i += chunk
			}
		}
	}
	for i := len(p.Faults) - 1; i >= 0; i-- {
		if p.Faults[i] == faultNone {
			continue
		}
		fs := append([]fault{}, p.Faults...)
		fs[i] = faultNone
		try(plan{Faults: fs, Ops: p.Ops})
	}
	for len(p.Faults) > 0 && p.Faults[len(p.Faults)-1] == faultNone {
		p.Faults = p.Faults[:len(p.Faults)-1]
	}
	return p, res
}

// TestSimRapid draws the plans through rapid (-rapid.checks of them,
// -rapid.seed to replay), which shrinks a failing one to a minimal plan.
func TestSimRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := genPlan(rapidDrawer{rt})
		if res := runPlan(t, p); res.failed() {
			rt.Fatalf("%s\nplan:\n%s\nhistory:\n%s", strings.Join(res.Violations, "\n"), p, res.History)
		}
	})
}

// TestSimDeterministic runs seeds twice each and compares the two
// histories byte for byte (ids normalised in order of first appearance):
// the same seed is the same history, so a failing seed replays.
func TestSimDeterministic(t *testing.T) {
	seed := *simSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for i := range uint64(20) {
		s := seed + i
		p := genPlan(newPCG(s))
		a, b := runPlan(t, p), runPlan(t, p)
		if a.History != b.History || strings.Join(a.Violations, "\n") != strings.Join(b.Violations, "\n") {
			dir := t.TempDir()
			_ = os.WriteFile(filepath.Join(dir, "a.txt"), []byte(a.History+strings.Join(a.Violations, "\n")), 0o644)
			_ = os.WriteFile(filepath.Join(dir, "b.txt"), []byte(b.History+strings.Join(b.Violations, "\n")), 0o644)
			t.Fatalf("seed %d: two runs differ:\n%s", s, firstDiff(a.History+strings.Join(a.Violations, "\n"), b.History+strings.Join(b.Violations, "\n")))
		}
	}
}

// firstDiff shows where two texts first differ, a few lines either side.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		if i >= len(la) || i >= len(lb) || la[i] != lb[i] {
			lo := max(0, i-8)
			return fmt.Sprintf("first run:\n%s\nsecond run:\n%s", strings.Join(la[lo:min(len(la), i+3)], "\n"), strings.Join(lb[lo:min(len(lb), i+3)], "\n"))
		}
	}
	return "(same)"
}

// TestSimReplay shows that a failing seed replays to the same failure:
// with a sabotaged vendor (its deletes delete nothing, so a revoke leaves
// its site), the first seed that breaks an invariant is run twice more and
// both runs break the same invariants with the same history.
func TestSimReplay(t *testing.T) {
	sabotage := func(v *vendor) { v.forgetDeletes = true }
	for s := uint64(1); s <= 200; s++ {
		p := genPlan(newPCG(s))
		first := runPlan(t, p, sabotage)
		if !first.failed() {
			continue
		}
		for range 2 {
			again := runPlan(t, genPlan(newPCG(s)), sabotage)
			if again.History != first.History || strings.Join(again.Violations, "\n") != strings.Join(first.Violations, "\n") {
				t.Fatalf("seed %d replayed differently:\n%s", s, firstDiff(first.History+strings.Join(first.Violations, "\n"), again.History+strings.Join(again.Violations, "\n")))
			}
		}
		t.Logf("seed %d fails the same way each time: %s", s, strings.Join(first.Violations, "; "))
		return
	}
	t.Fatal("no seed of 1 to 200 broke an invariant with the vendor's deletes sabotaged")
}
