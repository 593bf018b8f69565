package vendorsim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault phases: when a random 5xx or drop strikes a request, relative to
// its work (the commit of a create or a delete). A 429 always strikes
// before.
const (
	PhaseBefore = "before" // nothing is done; the default
	PhaseAfter  = "after"  // the work is done, then the answer is a 500 or lost
	PhaseRandom = "random" // before or after, even odds, per request
)

// SimFaults are the simulator's fault knobs: the flags of `licensor
// vendor-sim`, and what POST /_sim/faults replaces while it runs. The zero
// value is no fault at all. They apply to the vendor routes, never to /_sim/.
type SimFaults struct {
	Latency     time.Duration // added to every request
	Jitter      time.Duration // a uniform extra of 0..Jitter on top of Latency
	Burst429    int           // the first N requests (past the token check) answer 429
	RetryAfter  time.Duration // Retry-After of every 429, sent in whole seconds rounded up; 0 sends none
	Rate429     float64       // probability, 0..1, that a request answers 429 (always before its work)
	Rate5xx     float64       // probability, 0..1, that a request answers 500 (FaultPhase says when)
	DropRate    float64       // probability, 0..1, that a request's answer is lost as DropMode says (FaultPhase says when)
	DropCreates int           // the first N creates are committed, then their answer is lost as DropMode says
	DropDeletes int           // the first N deletes of a site it holds are committed, then their answer is lost
	DropMode    string        // DropHang (the default), DropClose or Drop5xxAfterCommit (always after the work)
	FaultPhase  string        // PhaseBefore (the default), PhaseAfter or PhaseRandom
}

// normalized checks the faults and fills in the defaults of the modes.
func (f SimFaults) normalized() (SimFaults, error) {
	switch {
	case f.Latency < 0 || f.Jitter < 0 || f.RetryAfter < 0:
		return f, fmt.Errorf("latency, jitter and retry-after cannot be negative")
	case f.Burst429 < 0 || f.DropCreates < 0 || f.DropDeletes < 0:
		return f, fmt.Errorf("429-burst, drop-creates and drop-deletes cannot be negative")
	}
	for _, r := range []struct {
		name string
		p    float64
	}{{"429-rate", f.Rate429}, {"5xx-rate", f.Rate5xx}, {"drop-rate", f.DropRate}} {
		if !(r.p >= 0 && r.p <= 1) { // NaN too
			return f, fmt.Errorf("%s %v is not between 0 and 1", r.name, r.p)
		}
	}
	switch f.DropMode {
	case "":
		f.DropMode = DropHang
	case DropHang, DropClose, Drop5xxAfterCommit:
	default:
		return f, fmt.Errorf("drop-mode %q is not %s, %s or %s", f.DropMode, DropHang, DropClose, Drop5xxAfterCommit)
	}
	switch f.FaultPhase {
	case "":
		f.FaultPhase = PhaseBefore
	case PhaseBefore, PhaseAfter, PhaseRandom:
	default:
		return f, fmt.Errorf("fault-phase %q is not %s, %s or %s", f.FaultPhase, PhaseBefore, PhaseAfter, PhaseRandom)
	}
	return f, nil
}

type fault int

const (
	noFault fault = iota
	fault429
	fault5xx
	faultDrop
)

// dice are one request's random draws, each uniform in [0, 1). Every
// request draws all of them, whatever the faults, so a seed and a request
// order give one sequence, and changing one rate does not shift the others.
type dice struct {
	r429, r5xx, drop, phase, jitter float64
}

// roll needs s.mu held.
func (s *Simulator) roll() dice {
	return dice{s.rng.Float64(), s.rng.Float64(), s.rng.Float64(), s.rng.Float64(), s.rng.Float64()}
}

func (s *Simulator) reseed(seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seed = seed
	s.rng = rand.New(rand.NewPCG(seed, seed))
}

// strike decides a request's fault past the token check: the 429 burst
// first, then the 429 rate, the 5xx rate and the drop rate, in that order
// of precedence. It returns the fault to strike now, and sets c.after to
// the one to strike once the route has done its work.
func (s *Simulator) strike(c *simCall, d dice) (fault, string) {
	f := c.faults
	s.mu.Lock()
	s.served++
	burst := s.served <= f.Burst429
	s.mu.Unlock()
	var k fault
	var why string
	switch {
	case burst:
		return fault429, "429 burst"
	case d.r429 < f.Rate429:
		return fault429, "429 rate"
	case d.r5xx < f.Rate5xx:
		k, why = fault5xx, "5xx rate"
	case d.drop < f.DropRate:
		k, why = faultDrop, "drop rate"
	default:
		return noFault, ""
	}
	after := f.FaultPhase == PhaseAfter || f.FaultPhase == PhaseRandom && d.phase >= 0.5 ||
		k == faultDrop && f.DropMode == Drop5xxAfterCommit
	if after {
		c.after, c.why = k, why
		return noFault, ""
	}
	return k, why
}

// dropDue counts a committed write against its drop budget (dropped of
// limit) and reports whether its answer is to be lost.
func (s *Simulator) dropDue(dropped *int, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *dropped >= limit {
		return false
	}
	*dropped++
	return true
}

// setFaults counts the 429 burst and the drop budgets afresh.
func (s *Simulator) setFaults(f SimFaults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	s.served, s.droppedCreates, s.droppedDeletes = 0, 0, 0
}

// Faults returns the faults in force and the seed the random sequence
// last started from.
func (s *Simulator) Faults() (SimFaults, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults, s.seed
}
