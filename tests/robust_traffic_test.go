package tests

// The history checker's traffic: seeded clients of three consumers sending
// creates (keyed, keyless, retries of earlier keys, some with another
// body), revokes, shows and lists to the serves, vendor events through the
// simulator, and `licensor reconcile` runs; each operation recorded with
// its call, return and answer.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// robustWorkers is how many clients send at once (two per consumer).
const robustWorkers = 6

// run sends the traffic for d while the fault schedule strikes, and
// returns once both are over.
func (r *robustRun) run(d time.Duration) {
	until := time.Now().Add(d)
	var wg sync.WaitGroup
	var reconciling atomic.Bool
	for w := range robustWorkers {
		wg.Go(func() { r.worker(w, until, &reconciling) })
	}
	wg.Go(func() { r.faults(until) })
	wg.Wait()
}

// worker is one client: its consumer, and its seeded choice of what to
// send, to which serve, about which domain, and when.
func (r *robustRun) worker(w int, until time.Time, reconciling *atomic.Bool) {
	rng := rand.New(rand.NewPCG(r.seed, uint64(100+w)))
	consumer := robustConsumers[w%len(robustConsumers)]
	n := 0
	for time.Now().Before(until) {
		// Every draw is made each round, whatever is sent, so that the
		// seed fixes the sequence of choices.
		pause := time.Duration(20+rng.IntN(120)) * time.Millisecond
		// The last domain is the races' alone: the others' traffic keeps a
		// domain held most of the time, and a race needs it free.
		roll, d, si, alt := rng.IntN(100), rng.IntN(len(r.domains)-1), rng.IntN(len(r.serves)), rng.IntN(1<<30)
		<-time.After(pause) // the pace of the traffic, not a wait for a state
		domain := r.domains[d]
		switch {
		case roll < 27:
			n++
			key := fmt.Sprintf("rk-%d-%d-%d", r.seed, w, n)
			r.create(w, consumer, si, domain, key, "Robust A", true)
		case roll < 41:
			r.create(w, consumer, si, domain, "", "Robust A", false)
		case roll < 57:
			r.retry(w, consumer, si, alt)
		case roll < 68:
			r.revoke(w, consumer, si, domain, alt)
		case roll < 77:
			r.show(w, consumer, si, domain, alt)
		case roll < 86:
			r.list(w, consumer, si)
		case roll < 95:
			r.vendorEvent(domain, alt)
		case roll < 99:
			r.race(w, consumer, si, r.domains[len(r.domains)-1], alt)
		default:
			if reconciling.CompareAndSwap(false, true) {
				if out, err := r.runLicensor(30*time.Second, "reconcile"); err != nil {
					r.note("reconcile during the faults: %v %.200s", err, out)
				}
				r.mu.Lock()
				r.stats.faults["reconcile (cli)"]++
				r.mu.Unlock()
				reconciling.Store(false)
			}
		}
	}
}

// race sends a keyless create and, while it may still be at the vendor, a
// keyed create of the same consumer and domain to another serve, then
// revokes what the second was answered: a revoke racing an older create.
// It starts by revoking the consumer's own license of the domain, if it
// holds one, so that the domain is free for the race (the others' traffic
// keeps the few domains held most of the time).
//
// The vendor is told first to lose the answer of its next create after
// committing it (held until VENDOR_TIMEOUT): a failpoint armed for the
// race, as etcd's robustness tests arm theirs during the traffic (another
// create may take it).
func (r *robustRun) race(w int, consumer string, si int, domain string, alt int) {
	if len(r.seenIDs(consumer, domain)) > 0 {
		r.revoke(w, consumer, si, domain, 1)
	}
	if _, err := r.simCall(http.MethodPost, "/_sim/faults", `{"drop_creates":1,"drop_mode":"hang","fault_phase":"after"}`, http.StatusOK); err == nil {
		r.mu.Lock()
		r.stats.faults["vendor drops its next create"]++
		r.mu.Unlock()
	}
	var first sync.WaitGroup
	// The first create is another client of the history: it runs beside w.
	first.Go(func() { r.create(w+robustWorkers, consumer, si, domain, "", "Robust A", false) })
	<-time.After(time.Duration(100+alt%400) * time.Millisecond) // into the first create's vendor call
	key := fmt.Sprintf("rk-%d-%d-race-%d", r.seed, w, alt)
	other := (si + 1) % len(r.serves)
	r.create(w, consumer, other, domain, key, "Robust A", true)
	if ids := r.seenIDs(consumer, domain); len(ids) > 0 {
		r.revoke(w, consumer, si, domain, 1)
	}
	first.Wait()
}

// robustAnswered is a request's answer and its time in the history.
type robustAnswered struct {
	status    int
	header    http.Header
	body      string
	call, ret int64
}

// send sends one request to serve i. With no answer, its return is when
// the serve's process that held it died (what it did is then done, or left
// to its intent), or never when that process lives on.
func (r *robustRun) send(i int, method, path, consumer, key, body string) robustAnswered {
	s := r.serves[i]
	a := robustAnswered{call: r.now()}
	a.status, a.header, a.body = sendWith(robustClient, s.url()+path, method, r.tokens[consumer], key, body)
	a.ret = r.now()
	if a.status == 0 {
		a.ret = robustNever
		if d, ok := s.lastDeath(a.call, r.now()); ok {
			a.ret = d
		}
	}
	return a
}

// errorCode is the code of an error answer.
func errorCode(body string) string {
	var e struct{ Code string }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Code
}

// create sends a create: keyed (key not empty) or keyless; a new key is
// remembered for retries once its first answer came.
func (r *robustRun) create(w int, consumer string, si int, domain, key, name string, fresh bool) {
	in := robustInput{Kind: robustCreate, Consumer: consumer, Domain: domain, Key: key, Name: name, Op: r.opNumber(), Serve: si}
	a := r.send(si, http.MethodPost, "/api/licenses", consumer, key, fmt.Sprintf(`{"name":%q,"domain":%q}`, name, domain))
	out := robustOutput{Status: a.status, Code: errorCode(a.body), Replayed: a.header.Get("Idempotent-Replayed") == "true"}
	if a.status == http.StatusOK || a.status == http.StatusCreated {
		lic := decodeLicense(a.body)
		out.ID, out.LStatus, out.Code = lic.ID, lic.Status, ""
		r.saw(consumer, domain, lic.ID)
	}
	var op struct{ Operation struct{ ID string } }
	if a.status == http.StatusAccepted && json.Unmarshal([]byte(a.body), &op) == nil {
		in.Intent = op.Operation.ID
	}
	r.record(w, in, out, a.call, a.ret)
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.status == http.StatusCreated && key != "" {
		r.answers[key] = append(r.answers[key], robustAnswer{name: name, domain: domain, consumer: consumer,
			body: a.body, location: a.header.Get("Location"), replayed: out.Replayed})
	}
	if fresh {
		r.keys[consumer] = append(r.keys[consumer], robustKey{key: key, domain: domain, name: name})
	}
}

// retry sends an earlier key of the consumer again: with its body, or one
// time in five with another (which must be refused, 422, unless the key
// was released).
func (r *robustRun) retry(w int, consumer string, si, alt int) {
	r.mu.Lock()
	keys := r.keys[consumer]
	r.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	k := keys[alt%len(keys)]
	name := k.name
	if alt%5 == 0 {
		name = "Robust B"
	}
	r.create(w, consumer, si, k.domain, k.key, name, false)
}

// saw notes a license id the consumer was answered for the domain.
func (r *robustRun) saw(consumer, domain, id string) {
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[consumer] == nil {
		r.seen[consumer] = map[string][]string{}
	}
	for _, x := range r.seen[consumer][domain] {
		if x == id {
			return
		}
	}
	r.seen[consumer][domain] = append(r.seen[consumer][domain], id)
}

// seenIDs is the license ids the consumer was answered for the domain, oldest first.
func (r *robustRun) seenIDs(consumer, domain string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen[consumer][domain]...)
}

// revoke revokes the consumer's newest license of the domain (one time in
// four an older one: revoked again, it answers 204).
func (r *robustRun) revoke(w int, consumer string, si int, domain string, alt int) {
	ids := r.seenIDs(consumer, domain)
	if len(ids) == 0 {
		return
	}
	id := ids[len(ids)-1]
	if alt%4 == 0 {
		id = ids[alt%len(ids)]
	}
	in := robustInput{Kind: robustRevoke, Consumer: consumer, Domain: domain, ID: id, Op: r.opNumber(), Serve: si}
	a := r.send(si, http.MethodDelete, "/api/licenses/"+id, consumer, "", "")
	out := robustOutput{Status: a.status, Code: errorCode(a.body), Replayed: a.header.Get("Idempotent-Replayed") == "true"}
	r.record(w, in, out, a.call, a.ret)
}

// show reads one of the consumer's licenses of the domain; only an answer
// that says something is recorded (200, 404).
func (r *robustRun) show(w int, consumer string, si int, domain string, alt int) {
	ids := r.seenIDs(consumer, domain)
	if len(ids) == 0 {
		return
	}
	r.showID(w, consumer, si, domain, ids[alt%len(ids)])
}

func (r *robustRun) showID(w int, consumer string, si int, domain, id string) {
	in := robustInput{Kind: robustShow, Consumer: consumer, Domain: domain, ID: id, Op: r.opNumber(), Serve: si}
	a := r.send(si, http.MethodGet, "/api/licenses/"+id, consumer, "", "")
	if a.status != http.StatusOK && a.status != http.StatusNotFound {
		return
	}
	lic := decodeLicense(a.body)
	r.record(w, in, robustOutput{Status: a.status, ID: lic.ID, LStatus: lic.Status}, a.call, a.ret)
}

// list lists the consumer's licenses: one operation per domain, what the
// list shows of it (its one active or revoking license, or none).
func (r *robustRun) list(w int, consumer string, si int) {
	a := r.send(si, http.MethodGet, "/api/licenses?per_page=100", consumer, "", "")
	if a.status != http.StatusOK {
		return
	}
	var page struct{ Data []apiLicense }
	if err := json.Unmarshal([]byte(a.body), &page); err != nil {
		r.problem("%s list: %v: %.300s", consumer, err, a.body)
		return
	}
	for _, d := range r.domains {
		out := robustOutput{Status: http.StatusOK}
		for _, l := range page.Data {
			if l.Domain != d {
				continue
			}
			if out.ID != "" {
				r.problem("%s list shows two licenses of %s: %s and %s", consumer, d, out.ID, l.ID)
				out.Code = "two"
			}
			out.ID, out.LStatus = l.ID, l.Status
		}
		r.record(w, robustInput{Kind: robustList, Consumer: consumer, Domain: d, Op: r.opNumber(), Serve: si}, out, a.call, a.ret)
	}
}

// vendorEvent has the simulator change the domain's site on its own
// (suspend, reactivate, rotate its key, delete it), which sends its
// webhook to a serve. A deletion is in the history: the licenses of the
// site may be revoked by it from then on.
func (r *robustRun) vendorEvent(domain string, alt int) {
	code, _, body := sendWith(robustSimClient, "http://"+r.simAddr+"/sites?domain="+domain, http.MethodGet, faultSimToken, "", "")
	var list struct{ Data []simSite }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Data) == 0 {
		return
	}
	site := list.Data[alt%len(list.Data)]
	action := []string{"suspend", "reactivate", "rotate", "delete"}[alt%4]
	call := r.now()
	code, _, _ = sendWith(robustSimClient, "http://"+r.simAddr+"/_sim/sites/"+site.ID+"/"+action, http.MethodPost, faultSimToken, "", "")
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if code == http.StatusOK {
		r.stats.faults["vendor "+action]++
	}
	if action == "delete" && (code == http.StatusOK || code == 0) { // no answer: it may have been deleted
		r.deletes = append(r.deletes, robustSiteDelete{site: site.ID, domain: domain, call: call, ret: ret})
	}
}
