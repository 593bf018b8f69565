package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// settle ends the case as an operator would find it: faults off, every
// held call answered, every vendor event delivered, time past every lease
// and settle window, reconciler passes until no intent is open, and the
// events numbered for the feed.
func (w *world) settle() {
	w.note("settle")
	w.v.off = true
	w.armed = [procs]int{}
	for round := 0; len(w.flights) > 0 || w.heldCount() > 0; round++ {
		if round == 50 {
			w.problems = append(w.problems, "settle: operations still running after 50 rounds")
			return
		}
		// One at a time, each run until it blocks or ends: the order is
		// the schedule's, not the Go scheduler's.
		for w.heldCount() > 0 {
			w.release(op{Kind: opRelease})
			w.quiesce()
		}
		w.quiesce()
		if len(w.flights) > 0 {
			time.Sleep(time.Minute)
			w.quiesce()
		}
	}
	p := w.ps[0]
	for i := range w.v.events {
		ev := &w.v.events[i]
		for try := 0; !ev.Delivered && try < 5; try++ {
			w.deliver(op{Kind: opDeliver, Proc: 0, Ref: i}, i)
			w.quiesce()
			if !ev.Delivered {
				time.Sleep(time.Minute)
			}
		}
	}
	for pass := 0; ; pass++ {
		open := w.openIntents()
		if open == 0 {
			break
		}
		if pass == 30 {
			w.violate("settled", "%d intents still pending or processing after %d reconciler passes", open, pass)
			break
		}
		time.Sleep(3 * time.Minute) // past the lease, the settle window and the backoff
		out, err := p.app.Reconciler.RunOnce(p.ctx)
		var results []string
		for _, r := range out {
			results = append(results, r.Operation+":"+r.Result)
		}
		w.note("  reconcile [%s] %v", strings.Join(results, " "), err)
	}
	w.checkPendingFinished()
	w.discardFailed()
	// Every consumer event dispatched and delivered, the endpoints
	// answering now: past each retry's backoff, and past the claims of
	// attempts a crash abandoned.
	for round := 0; ; round++ {
		out, err := hookPass(p, 0)
		if err != nil {
			w.problems = append(w.problems, fmt.Sprintf("webhooks: %v", err))
			return
		}
		var owed int64
		if err := p.db.Raw("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'").Scan(&owed).Error; err != nil {
			w.problems = append(w.problems, fmt.Sprintf("count owed deliveries: %v", err))
			return
		}
		if owed == 0 {
			break
		}
		if round == 20 {
			w.violate("webhooks", "%d deliveries still pending after %d passes (%s)", owed, round, out)
			break
		}
		time.Sleep(10 * time.Minute)
	}
}

// ulidOf is an event id's ULID, which the history numbers.
func ulidOf(id string) string { return strings.TrimPrefix(id, "evt_") }

// checkHooks: every event of each consumer's feed reached that consumer's
// endpoint at least once (none is failed: the simulation's retry window
// is longer than its time), only that consumer's, and every delivery of
// one event carried the same bytes.
func (w *world) checkHooks() {
	for _, c := range consumers {
		feed, ok := w.feed("webhooks", c)
		if !ok {
			continue
		}
		for _, e := range feed {
			got := w.hooks.receipts(e.ID)
			if len(got) == 0 {
				w.violate("webhooks", "%s's event %s (%s, sequence %d) never reached its endpoint", c, ulidOf(e.ID), e.Type, e.Sequence)
				continue
			}
			for _, r := range got {
				if r.consumer != c {
					w.violate("webhooks", "%s's event %s reached %s's endpoint", c, ulidOf(e.ID), r.consumer)
				}
				if r.body != got[0].body {
					w.violate("webhooks", "%s's event %s was delivered as two bodies:\n%s\n%s", c, ulidOf(e.ID), got[0].body, r.body)
				}
			}
		}
	}
}

// checkPendingFinished: a create answered 202 is kept and finished (the
// promise of a 202): once settled, its intent is completed or superseded
// (a revoke), or abandoned or failed only when another consumer held the
// domain (then or since: it may have revoked it meanwhile). (Run before
// the operator discards what failed.)
func (w *world) checkPendingFinished() {
	for _, r := range w.records {
		if r.op.Kind != opCreate || r.ans.Status != http.StatusAccepted {
			continue
		}
		var body struct {
			Operation struct {
				ID string `json:"id"`
			} `json:"operation"`
		}
		if json.Unmarshal([]byte(r.ans.Body), &body) != nil || body.Operation.ID == "" {
			w.violate("pending", "step %d (%s): a 202 naming no operation: %s", r.step, r.op, r.ans.Body)
			continue
		}
		var row struct{ Status string }
		if err := w.ps[0].db.Raw("SELECT status FROM idempotency_keys WHERE public_id = ?", body.Operation.ID).Scan(&row).Error; err != nil {
			w.problems = append(w.problems, fmt.Sprintf("read intent %s: %v", body.Operation.ID, err))
			continue
		}
		if row.Status == "completed" || row.Status == "superseded" {
			continue
		}
		var others int64
		_ = w.ps[0].db.Raw("SELECT COUNT(*) FROM licenses l JOIN consumers c ON c.id = l.consumer_id WHERE l.domain = ? AND c.name <> ?",
			domains[r.op.Domain], r.consumer).Scan(&others).Error
		if others == 0 {
			w.violate("pending", "step %d (%s) answered 202 (intent %s); settled, the intent is %s, and no other consumer ever held %s",
				r.step, r.op, body.Operation.ID, row.Status, domains[r.op.Domain])
		}
	}
}

// discardFailed does what an operator does with the intents the
// reconciler gave up on (failed) or abandoned: discards them, which first
// deletes a site their create may have left at the vendor, no license's.
func (w *world) discardFailed() {
	var ids []string
	if err := w.ps[0].db.Raw("SELECT public_id FROM idempotency_keys WHERE status IN ('failed', 'abandoned') AND public_id IS NOT NULL ORDER BY id").
		Scan(&ids).Error; err != nil {
		w.problems = append(w.problems, fmt.Sprintf("read the failed intents: %v", err))
	}
	for _, id := range ids {
		a := w.ps[0].do(http.MethodPost, "/api/intents/"+id+"/discard", `{"reason":"settled by the simulation"}`, "Authorization", "Bearer "+w.tokens[operator])
		w.note("  discard intent %s -> %d %s", id, a.Status, a.Body)
	}
}

// violate records a broken invariant.
func (w *world) violate(name, format string, args ...any) {
	w.violations = append(w.violations, name+": "+fmt.Sprintf(format, args...))
}

// openIntents counts the intents still pending or processing, or
// superseded and not yet cleared.
func (w *world) openIntents() int64 {
	var n int64
	// A superseded intent that may have reached the vendor is open too until
	// the reconciler cleared what it may have left there.
	if err := w.ps[0].db.Raw("SELECT COUNT(*) FROM idempotency_keys WHERE status IN ('pending', 'processing') OR (status = 'superseded' AND phase = 'started')").Scan(&n).Error; err != nil {
		w.problems = append(w.problems, fmt.Sprintf("count open intents: %v", err))
	}
	return n
}

// licenseView is a license as GET /api/licenses shows it.
type licenseView struct {
	ID           string `json:"id"`
	Domain       string `json:"domain"`
	Status       string `json:"status"`
	VendorSiteID string `json:"vendor_site_id"`
	LicenseKey   string `json:"license_key"`
}

// held is every license of every consumer (revoked ones too), as
// GET /api/licenses/{id} shows it (through process 0).
func (w *world) held() map[string][]licenseView {
	var rows []struct{ ID, Consumer string }
	err := w.ps[0].db.Raw("SELECT l.id AS id, c.name AS consumer FROM licenses l JOIN consumers c ON c.id = l.consumer_id ORDER BY l.created_at, l.id").
		Scan(&rows).Error
	if err != nil {
		w.problems = append(w.problems, fmt.Sprintf("read the licenses: %v", err))
	}
	out := map[string][]licenseView{}
	for _, r := range rows {
		a := w.ps[0].do(http.MethodGet, "/api/licenses/"+r.ID, "", "Authorization", "Bearer "+w.tokens[r.Consumer])
		var one struct {
			Data licenseView `json:"data"`
		}
		if a.Status != http.StatusOK || json.Unmarshal([]byte(a.Body), &one) != nil {
			w.violate("show", "GET /api/licenses/%s as %s: %d %s", r.ID, r.Consumer, a.Status, a.Body)
			continue
		}
		out[r.Consumer] = append(out[r.Consumer], one.Data)
	}
	return out
}

// check runs every invariant on the settled world.
func (w *world) check() {
	if len(w.problems) > 0 {
		return
	}
	held := w.held()
	w.checkAnswersDocumented()
	w.checkReplays()
	w.checkVendorMatches(held)
	w.checkFeeds(held)
	w.checkCreatedExists(held)
	w.checkRevokeFinal(held)
	w.checkHooks()
	w.checkLicenseIntents()
}

// checkLicenseIntents: the intent that made a license is completed (the
// license row and the intent's completion commit together: a crash leaves
// both or neither, and nothing later moves a completed intent).
func (w *world) checkLicenseIntents() {
	var rows []struct{ ID, Domain, Status string }
	err := w.ps[0].db.Raw(`SELECT l.id, l.domain, COALESCE(k.status, 'gone') AS status FROM licenses l
		LEFT JOIN idempotency_keys k ON k.public_id = l.intent_id
		WHERE l.intent_id IS NOT NULL AND (k.status IS NULL OR k.status <> 'completed') ORDER BY l.created_at, l.id`).Scan(&rows).Error
	if err != nil {
		w.problems = append(w.problems, fmt.Sprintf("read the licenses' intents: %v", err))
		return
	}
	for _, r := range rows {
		w.violate("intent", "license %s (%s) was made by an intent that is %s, not completed", r.ID, r.Domain, r.Status)
	}
}

// documented is what the API documents for each operation (docs/api.md):
// never a 500.
var documented = map[kind][]int{
	opCreate: {200, 201, 202, 409, 422, 503},
	opRevoke: {202, 204, 404, 409, 422, 503},
	opRotate: {200, 202, 404, 409, 422, 503},
	opShow:   {200, 404},
	opList:   {200},
	// A vendor event: received (200), its id with another body (409), or
	// not now (503).
	opDeliver: {200, 202, 409, 503},
}

// createdSince reports whether the license was recorded after its site
// was deleted: it did not hold the site then.
func (w *world) createdSince(id, site string) bool {
	holders, ok := w.v.deleted[site]
	return ok && !holders[id]
}

// checkAnswersDocumented: every answer is one the API documents for its
// operation (no 500, no undocumented status).
func (w *world) checkAnswersDocumented() {
	for _, r := range w.records {
		if !slices.Contains(documented[r.op.Kind], r.ans.Status) {
			w.violate("documented", "step %d (%s) answered %d: %s", r.step, r.op, r.ans.Status, r.ans.Body)
		}
	}
}

// stored is the status of a key's answer that had an effect, stored and
// replayed for the key: a create's 201, a rotation's 200, a revoke's 204.
var stored = map[kind]int{opCreate: http.StatusCreated, opRotate: http.StatusOK, opRevoke: http.StatusNoContent}

// checkReplays: every answer of a key (per consumer, same request) after
// its first stored answer is that answer byte for byte, and a replay says
// so; a replay is always of a stored answer (a create's 200, which had no
// effect, is never replayed); a key never answers 201 then 200.
func (w *world) checkReplays() {
	type keyOf struct {
		consumer, method, path, key, body string
	}
	first := map[keyOf]record{}
	created := map[keyOf]int{}
	for _, r := range w.records {
		if r.key == "" || r.consumer == "vendor" {
			continue
		}
		k := keyOf{r.consumer, r.method, r.path, r.key, r.body}
		want, ok := first[k]
		switch {
		case ok && r.ans.Status/100 == 2 && (r.ans.Status != want.ans.Status || r.ans.Body != want.ans.Body):
			w.violate("replay", "step %d (%s) answered %d %s; the key's stored answer (step %d) is %d %s",
				r.step, r.op, r.ans.Status, r.ans.Body, want.step, want.ans.Status, want.ans.Body)
		case ok && r.ans.Status/100 == 2 && !r.ans.Replayed:
			w.violate("replay", "step %d (%s) answered the stored answer of step %d without Idempotent-Replayed", r.step, r.op, want.step)
		case !ok && r.ans.Replayed && r.ans.Status != stored[r.op.Kind] && r.ans.Status != http.StatusAccepted:
			w.violate("replay", "step %d (%s) replayed %d %s, an answer that had no effect", r.step, r.op, r.ans.Status, r.ans.Body)
		}
		if r.op.Kind == opCreate {
			if s, ok := created[k]; ok && s == http.StatusCreated && r.ans.Status == http.StatusOK {
				w.violate("replay", "step %d (%s) answered 200 after the key answered 201", r.step, r.op)
			}
			if r.ans.Status == http.StatusCreated || r.ans.Status == http.StatusOK {
				created[k] = r.ans.Status
			}
		}
		if !ok && r.ans.Status == stored[r.op.Kind] {
			first[k] = r
		}
	}
}

// checkVendorMatches: the vendor holds one site per license that is not
// revoked (the license's vendor_site_id, for its domain), and no other: none
// for a revoked license's domain nor for a domain no license holds. No
// license is left revoking.
func (w *world) checkVendorMatches(held map[string][]licenseView) {
	holder := map[string]licenseView{} // by domain
	for _, c := range consumers {
		for _, l := range held[c] {
			switch l.Status {
			case "revoked":
				continue
			case "revoking":
				w.violate("vendor", "license %s (%s) is still revoking after settle", l.ID, l.Domain)
			}
			if h, ok := holder[l.Domain]; ok {
				w.violate("vendor", "licenses %s and %s both hold %s", h.ID, l.ID, l.Domain)
			}
			holder[l.Domain] = l
			s, ok := w.v.sites[l.Domain]
			switch {
			case (!ok || s.ID != l.VendorSiteID) && w.createdSince(l.ID, l.VendorSiteID):
				w.violate("vendor", "license %s (%s, %s) holds site %s, deleted before the license was recorded", l.ID, c, l.Domain, l.VendorSiteID)
			case !ok:
				w.violate("vendor", "license %s (%s, %s) has no vendor site", l.ID, c, l.Domain)
			case s.ID != l.VendorSiteID:
				w.violate("vendor", "license %s (%s) names site %s, the vendor's is %s", l.ID, l.Domain, l.VendorSiteID, s.ID)
			}
		}
	}
	for _, d := range w.v.domains() {
		if _, ok := holder[d]; !ok {
			w.violate("vendor", "the vendor's site %s for %s is no license's", w.v.sites[d].ID, d)
		}
	}
}

// feedEvent is one event of GET /api/events.
type feedEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Sequence uint64 `json:"sequence"`
	Data     struct {
		License *licenseView `json:"license"`
	} `json:"data"`
}

// feed is the consumer's feed (GET /api/events); a failure to read it
// breaks the invariant named.
func (w *world) feed(invariant, c string) ([]feedEvent, bool) {
	a := w.ps[0].do(http.MethodGet, "/api/events?per_page=100", "", "Authorization", "Bearer "+w.tokens[c])
	var page struct {
		Data []feedEvent `json:"data"`
	}
	if a.Status != http.StatusOK || json.Unmarshal([]byte(a.Body), &page) != nil {
		w.violate(invariant, "GET /api/events as %s: %d %s", c, a.Status, a.Body)
		return nil, false
	}
	return page.Data, true
}

// checkFeeds: each license's events in the consumer's feed are numbered
// 1, 2, … without a gap, the last shows the license as it is, and they
// match its audit trail (one creation first; one license.revoked iff it is
// revoked).
func (w *world) checkFeeds(held map[string][]licenseView) {
	for _, c := range consumers {
		feed, ok := w.feed("feed", c)
		if !ok {
			continue
		}
		byLicense := map[string][]feedEvent{}
		for _, e := range feed {
			if e.Data.License != nil {
				byLicense[e.Data.License.ID] = append(byLicense[e.Data.License.ID], e)
			}
		}
		for _, l := range held[c] {
			evs := byLicense[l.ID]
			var types []string
			for i, e := range evs {
				types = append(types, e.Type)
				if e.Sequence != uint64(i+1) {
					w.violate("feed", "license %s: event %d (%s) has sequence %d", l.ID, i+1, e.Type, e.Sequence)
				}
			}
			if len(evs) == 0 {
				w.violate("feed", "license %s (%s) has no event", l.ID, l.Domain)
				continue
			}
			if last := evs[len(evs)-1].Data.License; last.Status != l.Status || last.LicenseKey != l.LicenseKey {
				w.violate("feed", "license %s is %s (key %s); its last event shows %s (key %s)", l.ID, l.Status, l.LicenseKey, last.Status, last.LicenseKey)
			}
			if types[0] != "license.created" || count(types, "license.created") != 1 {
				w.violate("feed", "license %s: events %v: one license.created, first", l.ID, types)
			}
			if revoked := count(types, "license.revoked"); revoked > 1 || (revoked == 1) != (l.Status == "revoked") {
				w.violate("feed", "license %s is %s; events %v", l.ID, l.Status, types)
			}
			w.checkTrail(c, l, types)
		}
	}
}

// checkTrail: the audit trail begins with the license's making, once,
// and records its revocation iff it is revoked.
func (w *world) checkTrail(c string, l licenseView, feed []string) {
	a := w.ps[0].do(http.MethodGet, "/api/licenses/"+l.ID+"/events", "", "Authorization", "Bearer "+w.tokens[c])
	var page struct {
		Data []struct {
			Event string `json:"event"`
		} `json:"data"`
	}
	if a.Status != http.StatusOK || json.Unmarshal([]byte(a.Body), &page) != nil {
		w.violate("trail", "GET /api/licenses/%s/events: %d %s", l.ID, a.Status, a.Body)
		return
	}
	var trail []string
	made := 0
	for _, e := range page.Data {
		trail = append(trail, e.Event)
		if e.Event == "created" || e.Event == "adopted" || e.Event == "reconciled" {
			made++
		}
	}
	if len(trail) == 0 || made != 1 || !slices.Contains([]string{"created", "adopted", "reconciled"}, trail[0]) {
		w.violate("trail", "license %s: audit trail %v: one making, first (feed %v)", l.ID, trail, feed)
	}
	if (count(trail, "revoked") == 1) != (l.Status == "revoked") || count(trail, "revoked") > 1 {
		w.violate("trail", "license %s is %s; audit trail %v", l.ID, l.Status, trail)
	}
}

// count is how many of xs are x.
func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// checkCreatedExists: a 201 is a license of the consumer's for the
// domain, which exists for good (revoked or not).
func (w *world) checkCreatedExists(held map[string][]licenseView) {
	for _, r := range w.records {
		if r.op.Kind != opCreate || r.ans.Status != http.StatusCreated {
			continue
		}
		var body struct {
			Data licenseView `json:"data"`
		}
		_ = json.Unmarshal([]byte(r.ans.Body), &body)
		found := false
		for _, l := range held[r.consumer] {
			found = found || (l.ID == body.Data.ID && l.Domain == domains[r.op.Domain])
		}
		if !found {
			w.violate("created", "step %d (%s) answered 201 for license %s, which %s does not hold", r.step, r.op, body.Data.ID, r.consumer)
		}
	}
}

// checkRevokeFinal: a revoke supersedes the consumer's open creates for
// the domain, so that none can bring the license back: when every create
// the consumer sent for the domain before a revoke of its license there
// had been answered (202 included: its intent is open) or lost with its
// process before the revoke was sent, and none was sent after, the
// consumer holds no license for the domain at the end. (A create still in
// flight when the revoke was sent may come after it, and make a new one.)
func (w *world) checkRevokeFinal(held map[string][]licenseView) {
	domainOf := map[string]string{}
	revoked := map[string]bool{} // licenses whose first 204 was seen, or revoked by the vendor's site.deleted
	for _, c := range consumers {
		for _, l := range held[c] {
			domainOf[l.ID] = l.Domain
			// Revoked by the vendor's deletion (its 204 said "already
			// revoked"): a vendor event supersedes nothing.
			revoked[l.ID] = w.v.ownDeletes[l.VendorSiteID]
		}
	}
	for _, r := range w.records {
		// A replayed 204 says the revoke finished at some time before:
		// only a revoke's own 204 says when.
		if r.op.Kind != opRevoke || r.ans.Status != http.StatusNoContent || r.ans.Replayed {
			continue
		}
		id := r.path[strings.LastIndex(r.path, "/")+1:]
		if revoked[id] {
			continue
		}
		revoked[id] = true
		d := domainOf[id]
		concurrent := slices.ContainsFunc(w.sent, func(c sentCreate) bool {
			return c.consumer == r.consumer && c.domain == d && (c.step >= r.step || c.ended < 0 || c.ended >= r.step)
		})
		if concurrent {
			continue
		}
		for _, l := range held[r.consumer] {
			if l.Domain == d && l.Status != "revoked" {
				w.violate("revoke", "%s's license %s for %s was revoked (step %d, answered 204 at step %d) after every create of %s's for it had ended, none sent since; yet %s holds license %s (%s) at the end",
					r.consumer, id, d, r.step, r.doneStep, r.consumer, r.consumer, l.ID, l.Status)
			}
		}
	}
}
