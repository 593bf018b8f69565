package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// drawer is where a plan's choices come from: rapid (which shrinks a
// failing plan) or a seeded PCG (the plain seeded runner).
type drawer interface {
	// draw is a number in [0, n).
	draw(n int, label string) int
}

// rapidDrawer draws through rapid.
type rapidDrawer struct{ t *rapid.T }

// draw is rapid's draw of [0, n), labelled in its report.
func (d rapidDrawer) draw(n int, label string) int { return rapid.IntRange(0, n-1).Draw(d.t, label) }

// pcgDrawer draws from a PCG source seeded by the case's seed.
type pcgDrawer struct{ r *rand.Rand }

// newPCG is the drawer of a seed.
func newPCG(seed uint64) pcgDrawer {
	return pcgDrawer{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// draw is the source's next number in [0, n).
func (d pcgDrawer) draw(n int, _ string) int { return d.r.IntN(n) }

// kind is an operation's kind.
type kind uint8

// The operations of a plan.
const (
	opCreate    kind = iota // POST /api/licenses, keyed or keyless
	opRevoke                // DELETE /api/licenses/{id}
	opRotate                // POST /api/licenses/{id}/rotate-key
	opShow                  // GET /api/licenses/{id}
	opList                  // GET /api/licenses
	opReconcile             // one reconciler pass (Reconciler.RunOnce)
	opChange                // a change on the vendor's own side, its event queued
	opDeliver               // a vendor event delivered (again) to a process
	opAdvance               // virtual time passes
	opRelease               // a hung vendor call proceeds
	opCrash                 // a process dies and is rebuilt from the database
	opArm                   // a process will hold before its Ref+1-th next database write
	opHook                  // a process dispatches consumer events and delivers what is due to the endpoints
	kinds
)

var kindNames = [...]string{"create", "revoke", "rotate", "show", "list", "reconcile", "change", "deliver", "advance", "release", "crash", "arm", "hook"}

// weights are how often each kind is drawn, out of their sum. opHook is
// not drawn with them: its passes are drawn after the rest of the plan and
// put among its operations, so that a seed's other operations are the same
// as before the dispatcher joined the simulation.
var weights = [kinds]int{opCreate: 30, opRevoke: 10, opRotate: 6, opShow: 4, opList: 2, opReconcile: 10,
	opChange: 5, opDeliver: 5, opAdvance: 9, opRelease: 12, opCrash: 6, opArm: 5}

var (
	advances = []time.Duration{5 * time.Second, 40 * time.Second, 2 * time.Minute, 10 * time.Minute}
	changes  = []string{vendorproto.EventSiteSuspended, vendorproto.EventSiteKeyRotated, vendorproto.EventSiteReactivated, vendorproto.EventSiteDeleted}
)

// op is one operation of a plan. Its fields are small numbers (which
// rapid shrinks towards 0): a ref picks among what exists when it runs.
type op struct {
	Kind     kind
	Proc     int // the process that serves it
	Consumer int
	Domain   int
	Key      int // 0: no Idempotency-Key; else k<Key>
	Name     int // the body's name: another name is another body
	Ref      int // a license (revoke, rotate, show), a held call (release), an event (deliver)
	Outcome  int // release: 0 answered, 1 done and lost, 2 not done; crash: held writes done (1) or not (0)
	Change   int // opChange: the event type
	Advance  int // opAdvance: index of advances
}

// plan is one case: the vendor's faults, one per call in order, and the
// operations.
type plan struct {
	Faults []fault
	Ops    []op
}

// maxOps bounds a plan's length.
const maxOps = 32

// genPlan draws a plan.
func genPlan(d drawer) plan {
	var p plan
	nf := d.draw(40, "faults")
	for i := 0; i < nf; i++ {
		// ok is the most common (and what rapid shrinks to).
		switch f := d.draw(10, "fault"); {
		case f < 4:
			p.Faults = append(p.Faults, faultNone)
		case f == 4:
			p.Faults = append(p.Faults, faultUnavailable)
		case f == 5 || f == 6:
			p.Faults = append(p.Faults, faultLost)
		case f == 7:
			p.Faults = append(p.Faults, faultRateLimited)
		default:
			p.Faults = append(p.Faults, faultHang)
		}
	}
	total := 0
	for _, w := range weights {
		total += w
	}
	n := 1 + d.draw(maxOps, "ops")
	for i := 0; i < n; i++ {
		w := d.draw(total, "kind")
		var o op
		for k, kw := range weights {
			if w < kw {
				o.Kind = kind(k)
				break
			}
			w -= kw
		}
		o.Proc = d.draw(procs, "proc")
		switch o.Kind {
		case opCreate:
			o.Consumer = d.draw(len(consumers), "consumer")
			o.Domain = d.draw(len(domains), "domain")
			o.Key = d.draw(4, "key")
			o.Name = d.draw(2, "name")
		case opRevoke, opShow:
			o.Consumer = d.draw(len(consumers), "consumer")
			o.Ref = d.draw(8, "license")
		case opRotate:
			o.Consumer = d.draw(len(consumers), "consumer")
			o.Ref = d.draw(8, "license")
			o.Key = d.draw(3, "key")
		case opList:
			o.Consumer = d.draw(len(consumers), "consumer")
		case opChange:
			o.Domain = d.draw(len(domains), "domain")
			o.Change = d.draw(len(changes), "change")
		case opDeliver:
			o.Ref = d.draw(8, "event")
		case opAdvance:
			o.Advance = d.draw(len(advances), "advance")
		case opRelease:
			o.Ref = d.draw(8, "call")
			o.Outcome = d.draw(3, "outcome")
		case opCrash:
			o.Outcome = d.draw(2, "applied")
		case opArm:
			o.Ref = d.draw(4, "write")
		}
		p.Ops = append(p.Ops, o)
	}
	for range d.draw(maxHooks+1, "hooks") {
		at := d.draw(len(p.Ops)+1, "hook at")
		h := op{Kind: opHook, Proc: d.draw(procs, "proc"), Outcome: d.draw(len(hookOutcomes), "endpoints")}
		p.Ops = slices.Insert(p.Ops, at, h)
	}
	return p
}

// maxHooks bounds a plan's dispatcher passes.
const maxHooks = 4

// String is the operation as the history shows it.
func (o op) String() string {
	switch o.Kind {
	case opCreate:
		key := "no key"
		if o.Key > 0 {
			key = fmt.Sprintf("key k%d", o.Key)
		}
		return fmt.Sprintf("p%d create %s %s name=%d %s", o.Proc, consumers[o.Consumer], domains[o.Domain], o.Name, key)
	case opRevoke, opShow:
		return fmt.Sprintf("p%d %s %s license#%d", o.Proc, kindNames[o.Kind], consumers[o.Consumer], o.Ref)
	case opRotate:
		return fmt.Sprintf("p%d rotate %s license#%d key r%d", o.Proc, consumers[o.Consumer], o.Ref, o.Key)
	case opList:
		return fmt.Sprintf("p%d list %s", o.Proc, consumers[o.Consumer])
	case opReconcile:
		return fmt.Sprintf("p%d reconcile", o.Proc)
	case opChange:
		return fmt.Sprintf("vendor %s %s", changes[o.Change], domains[o.Domain])
	case opDeliver:
		return fmt.Sprintf("p%d deliver event#%d", o.Proc, o.Ref)
	case opAdvance:
		return fmt.Sprintf("advance %s", advances[o.Advance])
	case opRelease:
		return fmt.Sprintf("release call#%d as %s", o.Ref, []string{"answered", "done-lost", "not-done"}[o.Outcome])
	case opCrash:
		return fmt.Sprintf("crash p%d (held writes done: %v)", o.Proc, o.Outcome == 1)
	case opArm:
		return fmt.Sprintf("p%d will hold before its write #%d", o.Proc, o.Ref+1)
	case opHook:
		return fmt.Sprintf("p%d dispatches and delivers webhooks (the endpoints %s)", o.Proc, hookOutcomes[o.Outcome])
	}
	return "?"
}

// String is the plan, one operation a line, then the faults.
func (p plan) String() string {
	var b strings.Builder
	for i, o := range p.Ops {
		fmt.Fprintf(&b, "%3d  %s\n", i, o)
	}
	fs := make([]string, len(p.Faults))
	for i, f := range p.Faults {
		fs[i] = f.String()
	}
	fmt.Fprintf(&b, "vendor faults by call: [%s]\n", strings.Join(fs, " "))
	return b.String()
}
