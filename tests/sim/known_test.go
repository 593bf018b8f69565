package sim

import (
	"flag"
	"strings"
	"testing"
)

var simKnown = flag.Bool("sim.known", false, "sim: run the regression tests of the known bugs (they fail until the bugs are fixed)")

// knownBugs are the shrunk plans that showed each bug of today's code the
// simulation found. Each is a regression test, skipped until its fix
// lands (-sim.known runs them): a plan must then pass with no break of an
// invariant, known or not.
var knownBugs = []struct {
	name  string
	bug   string
	plan  plan
	seed  uint64 // when plan is empty: the seed whose plan shows the bug (not shrunk)
	fixed bool   // the bug is fixed: its plan runs in every TestKnownBugs, and must pass
}{
	{
		name:  "the feed shows revoking after a failed revoke",
		bug:   "the feed's last event shows revoking after a failed revoke reopened the license (fixed: the reopen republishes the license)",
		fixed: true,
		seed:  1796323900501535580,
	},
	{
		name:  "orphan site after a create outlived its lease",
		bug:   "orphan site: a create made it, then could not record it (fixed: a site made and not recorded is discarded, its claim deciding)",
		fixed: true,
		plan: plan{Faults: []fault{faultNone, faultUnavailable, faultNone, faultHang, faultHang}, Ops: []op{
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 1, Key: 1, Name: 1},
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 1},
			{Kind: opCreate, Proc: 0, Consumer: 0, Domain: 0, Key: 1},
			{Kind: opAdvance, Advance: 2},
			{Kind: opReconcile, Proc: 1},
			{Kind: opList, Proc: 0, Consumer: 0},
			{Kind: opCreate, Proc: 0, Consumer: 1, Domain: 2, Key: 2},
			{Kind: opRevoke, Proc: 0, Consumer: 0, Ref: 3},
		}},
	},
	{
		name:  "a rotation's retry answers 500 when the vendor lost the site",
		bug:   "a rotation's retry answers 500 when the vendor lost the site (fixed: the vendor's 404, 422 vendor_rejected)",
		fixed: true,
		plan: plan{Faults: []fault{faultHang}, Ops: []op{
			{Kind: opCreate, Proc: 0, Consumer: 0, Domain: 2, Key: 2},
			{Kind: opCreate, Proc: 0, Consumer: 1, Domain: 2, Name: 1},
			{Kind: opCreate, Proc: 0, Consumer: 0, Domain: 0, Key: 1, Name: 1},
			{Kind: opChange, Domain: 2, Change: 3},
			{Kind: opRotate, Proc: 0, Consumer: 1, Ref: 2},
			{Kind: opRotate, Proc: 1, Consumer: 1, Ref: 0},
		}},
	},
	{
		name:  "a discarded site whose delete failed blocked its domain",
		bug:   "a create's reconciliation found its discarded site again and again (fixed: a spent site found is discarded again before the create looks anew)",
		fixed: true,
		plan: plan{Faults: []fault{faultNone, faultHang, faultHang, faultNone, faultNone, faultUnavailable}, Ops: []op{
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 1, Key: 3, Name: 1},
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 0, Name: 1},
			{Kind: opCreate, Proc: 0, Consumer: 0, Domain: 2},
			{Kind: opAdvance, Advance: 2},
			{Kind: opRelease, Ref: 4},
		}},
	},
	{
		name:  "orphan site of a superseded create that never learnt it made it",
		bug:   "orphan site: made for a superseded create that never learnt it made it (fixed: the reconciler clears a superseded intent that may have reached the vendor)",
		fixed: true,
		plan: plan{Faults: []fault{faultNone, faultNone, faultNone, faultHang}, Ops: []op{
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 0, Key: 3, Name: 1},
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 2, Key: 2, Name: 1},
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 2, Key: 1, Name: 1},
			{Kind: opRevoke, Proc: 0, Consumer: 0, Ref: 7},
			{Kind: opCrash, Proc: 1, Outcome: 1},
		}},
	},
	{
		name:  "a retry of a superseded create forgot its site was still to clear",
		bug:   "a superseded create's retry marked its intent finished before the reconciler cleared its site (fixed: the retry leaves the phase)",
		fixed: true,
		plan: plan{Faults: []fault{faultNone, faultRateLimited, faultLost, faultNone, faultNone, faultNone, faultHang}, Ops: []op{
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 1, Key: 3},
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 0, Key: 2},
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 1, Key: 2, Name: 1},
			{Kind: opRevoke, Proc: 0, Consumer: 0, Ref: 0},
			{Kind: opAdvance, Advance: 1},
			{Kind: opRelease, Ref: 1, Outcome: 2},
			{Kind: opCreate, Proc: 0, Consumer: 0, Domain: 1, Key: 3},
		}},
	},
	{
		name:  "a failed discard forgot the site of a create that met a revoking license",
		bug:   "orphan site: a create's discard could not be written and it answered 409 domain_taken (fixed: the outcome is kept unknown, the reconciler discards the site)",
		fixed: true,
		plan: plan{Faults: []fault{faultRateLimited, faultNone, faultNone, faultLost}, Ops: []op{
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 2, Name: 1},
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 2, Key: 3},
			{Kind: opRevoke, Proc: 0, Consumer: 1, Ref: 2},
			{Kind: opArm, Proc: 1, Ref: 1},
			{Kind: opAdvance, Advance: 1},
		}},
	},
	{
		name:  "a license recorded for a site the vendor deleted before its license existed",
		bug:   "a license recorded for a site whose site.deleted arrived first, and was dropped (fixed: a deleted site is claimed spent)",
		fixed: true,
		plan: plan{Faults: []fault{faultNone, faultHang, faultNone, faultRateLimited, faultRateLimited, faultHang, faultLost}, Ops: []op{
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 0, Key: 2},
			{Kind: opArm, Proc: 0, Ref: 0},
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 1, Key: 2, Name: 1},
			{Kind: opCreate, Proc: 0, Consumer: 1, Domain: 1},
			{Kind: opCreate, Proc: 0, Consumer: 1, Domain: 0, Name: 1},
			{Kind: opCreate, Proc: 0, Consumer: 1, Domain: 1},
			{Kind: opCreate, Proc: 0, Consumer: 1, Domain: 2},
			{Kind: opChange, Domain: 2, Change: 3},
			{Kind: opDeliver, Proc: 1, Ref: 0},
		}},
	},
	{
		name:  "a license recorded for a site deleted meanwhile",
		bug:   "a license recorded for a site the vendor deleted meanwhile (fixed: a site is claimed once, and a create whose site was spent looks again)",
		fixed: true,
		plan: plan{Faults: []fault{faultLost, faultRateLimited}, Ops: []op{
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 1, Key: 3},
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 2, Key: 3, Name: 1},
			{Kind: opArm, Proc: 1},
			{Kind: opCreate, Proc: 1, Consumer: 1, Domain: 2, Name: 1},
			{Kind: opCreate, Proc: 1, Consumer: 0, Domain: 2},
			{Kind: opRevoke, Proc: 0, Consumer: 0, Ref: 6},
		}},
	},
}

// TestKnownBugs replays the plan of each known bug: a fixed one always, the
// others skipped (naming the bug) until -sim.known; each must pass.
func TestKnownBugs(t *testing.T) {
	for _, k := range knownBugs {
		t.Run(k.name, func(t *testing.T) {
			if !*simKnown && !k.fixed {
				t.Skipf("%s: see its comment in invariants_test.go; -sim.known runs it", k.bug)
			}
			res := runPlan(t, planOrSeed(k.plan, k.seed))
			if v := append(res.Violations, res.Known...); len(v) > 0 {
				t.Fatalf("%s\nplan:\n%s\nhistory:\n%s", strings.Join(v, "\n"), k.plan, res.History)
			}
		})
	}
}

// TestKnownBugsShow checks that each known bug's plan still shows it
// (today's code): the regression tests above are not vacuous.
func TestKnownBugsShow(t *testing.T) {
	if *simKnown {
		t.Skip("-sim.known: the bugs are expected fixed")
	}
	for _, k := range knownBugs {
		if k.fixed {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			res := runPlan(t, planOrSeed(k.plan, k.seed))
			if !strings.Contains(strings.Join(res.Known, "\n"), k.bug) {
				t.Errorf("the plan no longer shows %q (fixed? then drop TestKnownBugsShow's entry and run TestKnownBugs with -sim.known); known: %v, violations: %v\nhistory:\n%s",
					k.bug, res.Known, res.Violations, res.History)
			}
		})
	}
}

// planOrSeed is p, or the plan the seed draws when p is empty.
func planOrSeed(p plan, seed uint64) plan {
	if len(p.Ops) == 0 {
		return genPlan(newPCG(seed))
	}
	return p
}
