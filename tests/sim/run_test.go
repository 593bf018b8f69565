package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// flight is an operation started and not yet answered: it runs in a
// goroutine of its own until it ends or blocks (at a held vendor call or
// database point), and the schedule goes on meanwhile.
type flight struct {
	step    int
	op      op
	proc    int
	method  string
	path    string
	body    string
	key     string
	done    chan struct{}
	ans     answer
	crashed bool // its process died while it ran: nobody saw its answer
	sent    int  // a create's index in world.sent; -1 for other operations
}

// record is an operation's answer, as the invariants read it.
type record struct {
	step, doneStep int
	op             op
	consumer       string
	method, path   string
	body, key      string
	ans            answer
}

// entry is one line of the history.
type entry struct {
	Step int
	Text string
}

// dbPoint is a process held just before one of its database writes.
type dbPoint struct {
	proc    int
	what    string
	release chan bool // true: the process crashed (the write fails)
}

// world is one case: the database file, the vendor, the processes and
// what happened.
type world struct {
	plan       plan
	path       string
	tokens     map[string]string
	v          *vendor
	ps         [procs]*process
	flights    []*flight
	records    []record
	history    []entry
	licenses   []string // license ids in order of first appearance in an answer
	points     []*dbPoint
	armed      [procs]int // the process holds at its armed-th next write (0: not armed)
	step       int
	problems   []string     // failures of the simulation itself (not of licensor)
	violations []string     // the invariants broken
	known      []string     // breaks of a known bug's (see knownOrphanSite)
	sent       []sentCreate // every create sent, answered or not
	hooks      *hookSink    // the consumers' webhook endpoints
	driver     string       // the SQLite driver the processes open through (config.DB.SQLiteDriver)
}

// sentCreate is a create as it was sent.
type sentCreate struct {
	consumer, domain string
	step             int
	ended            int // the step it was answered at (or lost, its process crashed); -1 while in flight
}

// note adds a line to the history.
func (w *world) note(format string, args ...any) {
	w.history = append(w.history, entry{Step: w.step, Text: fmt.Sprintf(format, args...)})
}

// result is what a case left: its normalised history and the invariants
// it broke.
type result struct {
	History    string
	Violations []string
	Known      []string // breaks of known bugs: failures only under -sim.strict
}

// failed reports whether the case broke an invariant.
func (r result) failed() bool { return len(r.Violations) > 0 || (*simStrict && len(r.Known) > 0) }

// runPlan runs the plan in a bubble of its own and returns its result;
// tweaks adjust the vendor first (a test's sabotage).
func runPlan(t *testing.T, p plan, tweaks ...func(*vendor)) result {
	s := acquireSlot(t)
	res := runPlanIn(t, s, p, tweaks...)
	if err := s.release(); err != nil {
		// The case left the file in a state the reset could not undo (a
		// transaction open, say): a failure of the case, with its seed.
		res.Violations = append(res.Violations, fmt.Sprintf("after the case: its database could not be reset: %v", err))
	}
	return res
}

// runPlanIn runs the plan in slot s, which holds the template's rows.
func runPlanIn(t *testing.T, s *slot, p plan, tweaks ...func(*vendor)) result {
	tp := theTemplate(t)
	path := s.path
	var res result
	// Each case is a subtest of its own (case#N under -v), its bubble
	// inside it.
	t.Run("case", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &world{plan: p, path: path, driver: s.driver, tokens: tp.tokens, v: newVendor(p.Faults), hooks: newHookSink()}
			w.v.log = w.note
			for _, tweak := range tweaks {
				tweak(w.v)
			}
			w.v.holders = func(proc int, site string) map[string]bool {
				var ids []string
				for i := range procs {
					if w.ps[(proc+i)%procs].read.Raw("SELECT id FROM licenses WHERE vendor_site_id = ?", site).Scan(&ids).Error == nil {
						break
					}
				}
				out := map[string]bool{}
				for _, id := range ids {
					out[id] = true
				}
				return out
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						w.problems = append(w.problems, fmt.Sprintf("panic: %v", r))
					}
				}()
				w.run()
			}()
			w.shutdown()
			res = w.result()
		})
	})
	return res
}

// run executes the plan, settles the world and checks the invariants.
func (w *world) run() {
	for i := range w.ps {
		if err := w.restart(i); err != nil {
			w.problems = append(w.problems, fmt.Sprintf("start p%d: %v", i, err))
			return
		}
	}
	for i, o := range w.plan.Ops {
		w.step = i
		w.exec(o)
		w.quiesce()
	}
	w.step = len(w.plan.Ops)
	w.settle()
	w.check()
	w.note("vendor calls: %s", w.v.tally())
}

// quiesce waits until every goroutine of the bubble is blocked (a held
// vendor call or database point, or done) and collects what ended.
func (w *world) quiesce() {
	synctest.Wait()
	kept := w.flights[:0]
	for _, f := range w.flights {
		select {
		case <-f.done:
			w.finish(f)
		default:
			kept = append(kept, f)
		}
	}
	w.flights = kept
}

// finish records an ended flight's answer.
func (w *world) finish(f *flight) {
	if f.sent >= 0 {
		w.sent[f.sent].ended = w.step
	}
	if f.crashed {
		w.note("  step %d (%s) lost: p%d crashed", f.step, f.op, f.proc)
		return
	}
	w.note("  step %d (%s) -> %d%s %s", f.step, f.op, f.ans.Status, replayedText(f.ans.Replayed), f.ans.Body)
	if f.method == "" {
		return
	}
	w.records = append(w.records, record{step: f.step, doneStep: w.step, op: f.op, consumer: consumerOf(f.op), method: f.method,
		path: f.path, body: f.body, key: f.key, ans: f.ans})
	w.learnIDs(f.ans.Body)
}

// replayedText is how the history marks a replay.
func replayedText(r bool) string {
	if r {
		return " (replayed)"
	}
	return ""
}

// consumerOf is the consumer whose token an operation sends ("vendor" for the others).
func consumerOf(o op) string {
	switch o.Kind {
	case opCreate, opRevoke, opRotate, opShow, opList:
		return consumers[o.Consumer]
	}
	return "vendor"
}

// learnIDs remembers the license ids an answer names.
func (w *world) learnIDs(body string) {
	var one struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	var many struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	var ids []string
	if json.Unmarshal([]byte(body), &one) == nil && one.Data.ID != "" {
		ids = append(ids, one.Data.ID)
	} else if json.Unmarshal([]byte(body), &many) == nil {
		for _, d := range many.Data {
			ids = append(ids, d.ID)
		}
	}
	for _, id := range ids {
		known := false
		for _, l := range w.licenses {
			known = known || l == id
		}
		if !known {
			w.licenses = append(w.licenses, id)
		}
	}
}

// license is the license ref picks, or a ULID no license has.
func (w *world) license(ref int) string {
	if len(w.licenses) == 0 {
		return "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	}
	return w.licenses[ref%len(w.licenses)]
}

// exec starts one operation.
func (w *world) exec(o op) {
	w.note("%s", o)
	switch o.Kind {
	case opCreate:
		key := ""
		if o.Key > 0 {
			key = fmt.Sprintf("k%d", o.Key)
		}
		body := fmt.Sprintf(`{"name":"Site %d","domain":"%s"}`, o.Name, domains[o.Domain])
		w.sent = append(w.sent, sentCreate{consumer: consumers[o.Consumer], domain: domains[o.Domain], step: w.step, ended: -1})
		w.request(o, http.MethodPost, "/api/licenses", body, key)
	case opRevoke:
		w.request(o, http.MethodDelete, "/api/licenses/"+w.license(o.Ref), "", "")
	case opRotate:
		w.request(o, http.MethodPost, "/api/licenses/"+w.license(o.Ref)+"/rotate-key", "", fmt.Sprintf("r%d", o.Key+1))
	case opShow:
		w.request(o, http.MethodGet, "/api/licenses/"+w.license(o.Ref), "", "")
	case opList:
		w.request(o, http.MethodGet, "/api/licenses", "", "")
	case opReconcile:
		p := w.ps[o.Proc]
		f := &flight{step: w.step, op: o, proc: o.Proc, done: make(chan struct{}), sent: -1}
		go func() {
			defer close(f.done)
			out, err := p.app.Reconciler.RunOnce(p.ctx)
			var results []string
			for _, r := range out {
				results = append(results, r.Operation+":"+r.Result)
			}
			f.ans = answer{Body: fmt.Sprintf("[%s]", strings.Join(results, " "))}
			if err != nil {
				f.ans.Body += " error: " + err.Error()
			}
		}()
		w.flights = append(w.flights, f)
	case opChange:
		if !w.v.change(changes[o.Change], domains[o.Domain], time.Now()) {
			w.note("  (no site)")
		}
	case opDeliver:
		if len(w.v.events) == 0 {
			w.note("  (no event)")
			return
		}
		w.deliver(o, o.Ref%len(w.v.events))
	case opAdvance:
		w.advance(advances[o.Advance])
	case opRelease:
		w.release(o)
	case opCrash:
		w.crash(o.Proc, o.Outcome == 1)
	case opArm:
		w.armed[o.Proc] = o.Ref + 1
	case opHook:
		p := w.ps[o.Proc]
		f := &flight{step: w.step, op: o, proc: o.Proc, done: make(chan struct{}), sent: -1}
		go func() {
			defer close(f.done)
			out, err := hookPass(p, o.Outcome)
			f.ans = answer{Body: out}
			if err != nil {
				f.ans.Body += " error: " + err.Error()
			}
		}()
		w.flights = append(w.flights, f)
	}
}

// request starts an HTTP request of a consumer's.
func (w *world) request(o op, method, path, body, key string) {
	p := w.ps[o.Proc]
	f := &flight{step: w.step, op: o, proc: o.Proc, method: method, path: path, body: body, key: key,
		done: make(chan struct{}), sent: -1}
	if o.Kind == opCreate {
		f.sent = len(w.sent) - 1
	}
	auth := "Bearer " + w.tokens[consumers[o.Consumer]]
	go func() {
		defer close(f.done)
		f.ans = p.doAt(f.step, method, path, body, "Authorization", auth, "Idempotency-Key", key)
	}()
	w.flights = append(w.flights, f)
}

// deliver sends the vendor's i-th event to a process, signed now.
func (w *world) deliver(o op, i int) {
	p := w.ps[o.Proc]
	ev := &w.v.events[i]
	f := &flight{step: w.step, op: o, proc: o.Proc, method: http.MethodPost, path: "/api/webhooks/vendor", body: string(ev.Body),
		key: ev.ID, done: make(chan struct{}), sent: -1}
	sig := vendorproto.Sign(webhookSecret, time.Now(), ev.Body)
	go func() {
		defer close(f.done)
		f.ans = p.do(http.MethodPost, "/api/webhooks/vendor", string(ev.Body), vendorproto.SignatureHeader, sig)
		if f.ans.Status/100 == 2 {
			ev.Delivered = true
		}
	}()
	w.flights = append(w.flights, f)
}

// held is everything held, vendor calls then database points, in order.
func (w *world) heldCount() int { return len(w.v.held) + len(w.points) }

// release lets one held call or point proceed.
func (w *world) release(o op) {
	n := w.heldCount()
	if n == 0 {
		w.note("  (nothing held)")
		return
	}
	i := o.Ref % n
	if i < len(w.v.held) {
		c := w.v.held[i]
		w.v.held = append(w.v.held[:i], w.v.held[i+1:]...)
		w.note("  released p%d %s", c.proc, c.what)
		c.release <- []fault{faultNone, faultLost, faultUnavailable}[o.Outcome]
		return
	}
	i -= len(w.v.held)
	pt := w.points[i]
	w.points = append(w.points[:i], w.points[i+1:]...)
	w.note("  released p%d before %s", pt.proc, pt.what)
	pt.release <- false
}

// advance lets d of virtual time pass. A held vendor call ends just before
// its caller's deadline, done and its answer lost, as the http driver's
// call would (it gives up at the deadline: owned work's falls within its
// lease, so no call outlives the lease, and a vendor that applied a call
// later still is what a drift check finds). Each ends alone, the earliest
// deadline first (in the order they hung, for one deadline), so that the
// schedule, not the Go scheduler, orders them.
func (w *world) advance(d time.Duration) {
	end := time.Now().Add(d)
	for {
		i := -1
		for j, c := range w.v.held {
			if !c.deadline.IsZero() && c.deadline.Before(end) && (i < 0 || c.deadline.Before(w.v.held[i].deadline)) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		c := w.v.held[i]
		if wait := time.Until(c.deadline) - time.Nanosecond; wait > 0 {
			time.Sleep(wait)
		}
		w.v.held = slices.Delete(w.v.held, i, i+1)
		w.note("  p%d's %s ends at its deadline (done, the answer lost)", c.proc, c.what)
		c.release <- faultLost
		w.quiesce()
	}
	if wait := time.Until(end); wait > 0 {
		time.Sleep(wait)
	}
}

// crash kills process i: its pools are closed (nothing of it lands after
// that), its held vendor calls end (writes done or not, as drawn), its
// goroutines run out, and it is rebuilt from the database.
func (w *world) crash(i int, done bool) {
	p := w.ps[i]
	p.closePools()
	for _, f := range w.flights {
		if f.proc == i {
			f.crashed = true
		}
	}
	for {
		j := slices.IndexFunc(w.v.held, func(c *vendorCall) bool { return c.proc == i })
		if j < 0 {
			break
		}
		c := w.v.held[j]
		w.v.held = slices.Delete(w.v.held, j, j+1)
		w.note("  p%d's %s ends (done: %v)", i, c.what, done)
		if done {
			c.release <- faultLost
		} else {
			c.release <- faultUnavailable
		}
		synctest.Wait() // one at a time: the order is the schedule's
	}
	for {
		j := slices.IndexFunc(w.points, func(pt *dbPoint) bool { return pt.proc == i })
		if j < 0 {
			break
		}
		pt := w.points[j]
		w.points = slices.Delete(w.points, j, j+1)
		pt.release <- true
		synctest.Wait()
	}
	w.armed[i] = 0
	w.quiesce()
	// What waits on a lock (SQLite's busy handler sleeps) ends in a while.
	for wait := 0; wait < 30 && slices.ContainsFunc(w.flights, func(f *flight) bool { return f.proc == i }); wait++ {
		time.Sleep(time.Second)
		w.quiesce()
	}
	p.stop()
	w.quiesce()
	for _, f := range w.flights {
		if f.proc == i {
			w.problems = append(w.problems, fmt.Sprintf("step %d: p%d's %s still runs after its crash", w.step, i, f.op))
		}
	}
	if err := w.restart(i); err != nil {
		w.problems = append(w.problems, fmt.Sprintf("restart p%d: %v", i, err))
		panic(err)
	}
}

// restart builds process i on the file, with its database points.
func (w *world) restart(i int) error {
	p, err := start(i, w.path, w.driver, w.v, w.hooks)
	if err != nil {
		return err
	}
	if err := withPoints(p.db, w.parker(i)); err != nil {
		return err
	}
	w.ps[i] = p
	return nil
}

// parker holds process i before its armed-th next write or transaction
// (outside the group commit's writer):
// the schedule then releases it or crashes the process there.
func (w *world) parker(i int) func(ctx context.Context, what string) error {
	return func(ctx context.Context, what string) error {
		// A write on a context that cannot end is the group commit's
		// writer's (detached from its callers'): held, it would gather
		// the writes of every request meanwhile and release them all at
		// once, in an order the Go scheduler picks. Its callers' points
		// are the ones that count.
		if w.armed[i] == 0 || ctx.Done() == nil {
			return nil
		}
		w.armed[i]--
		if w.armed[i] > 0 {
			return nil
		}
		pt := &dbPoint{proc: i, what: what, release: make(chan bool, 1)}
		w.points = append(w.points, pt)
		if <-pt.release {
			return errors.New("sim: the process crashed")
		}
		return ctx.Err()
	}
}

// shutdown ends every process so that the bubble's goroutines end.
func (w *world) shutdown() {
	w.v.off = true
	for len(w.v.held) > 0 {
		c := w.v.held[0]
		w.v.held = w.v.held[1:]
		c.release <- faultUnavailable
		synctest.Wait()
	}
	for len(w.points) > 0 {
		pt := w.points[0]
		w.points = w.points[1:]
		pt.release <- true
		synctest.Wait()
	}
	for _, p := range w.ps {
		if p != nil {
			p.closePools()
		}
	}
	synctest.Wait()
	for _, p := range w.ps {
		if p != nil {
			p.stop()
		}
	}
	synctest.Wait()
}

// result renders the history with its ids normalised.
func (w *world) result() result {
	var b strings.Builder
	for _, e := range w.history {
		fmt.Fprintf(&b, "%s\n", e.Text)
	}
	var v []string
	v = append(v, w.problems...)
	v = append(v, w.violations...)
	known := w.known
	if *simStrict {
		v, known = append(v, known...), nil
	}
	return result{History: normalise(b.String()), Violations: normaliseAll(v, b.String()), Known: normaliseAll(known, b.String())}
}

// ids matches what differs from run to run: the ULIDs licensor makes
// (intents, licenses, events, requests) and the digests of the keys it
// makes for keyless requests.
var ids = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b|"key_digest":"[0-9a-f]+"`)

// numbering gives each id its number in the order of first appearance.
type numbering map[string]string

// of is the id's number, given at its first appearance.
func (n numbering) of(id string) string {
	if v, ok := n[id]; ok {
		return v
	}
	if strings.HasPrefix(id, `"key_digest"`) {
		n[id] = fmt.Sprintf(`"key_digest":"<digest%d>"`, len(n)+1)
	} else {
		n[id] = fmt.Sprintf("<id%d>", len(n)+1)
	}
	return n[id]
}

// normalise replaces each id by its number in the order of first
// appearance, so that two runs of a seed compare byte for byte.
func normalise(s string) string {
	return ids.ReplaceAllStringFunc(s, numbering{}.of)
}

// normaliseAll normalises the violations with the numbering the history
// gave their ids.
func normaliseAll(vs []string, history string) []string {
	if len(vs) == 0 { // most cases: spare the scan of the history
		return nil
	}
	n := numbering{}
	for _, id := range ids.FindAllString(history, -1) {
		n.of(id)
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = ids.ReplaceAllStringFunc(v, n.of)
	}
	return out
}
