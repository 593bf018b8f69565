package tests

// The end of a history checker's run: the faults stop, everything settles,
// the last observations join the history, and the invariants that hold
// once nothing is in flight are checked.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/internal/testkit"
)

// settle ends the faults and waits until nothing is left in flight: every
// serve up, the vendor's faults cleared and its webhooks delivered, and
// every pending or processing intent settled (`licensor reconcile` runs
// beside the serves' own reconcilers). Failed intents may stay: a create
// for a domain another consumer holds is failed for good.
func (r *robustRun) settle() {
	t := r.t
	for _, s := range r.serves {
		if code, _, _ := sendWith(robustSimClient, s.url()+"/healthz", http.MethodGet, "", "", ""); code != http.StatusOK {
			if err := r.startServe(s); err != nil {
				t.Fatalf("a serve is down at the end of the faults: %v", err)
			}
		}
	}
	if _, err := r.simCall(http.MethodDelete, "/_sim/faults", "", http.StatusOK); err != nil {
		t.Fatal(err)
	}
	var hooks struct {
		Webhooks struct{ Sent, Delivered, Failed, Pending int }
	}
	if !testkit.Poll(90*time.Second, func() bool {
		body, err := r.simCall(http.MethodGet, "/_sim/stats", "", http.StatusOK)
		return err == nil && json.Unmarshal([]byte(body), &hooks) == nil && hooks.Webhooks.Pending == 0
	}) {
		t.Fatalf("the vendor's webhooks are still pending: %+v", hooks.Webhooks)
	}
	r.mu.Lock()
	restarted := r.stats.faults["vendor-sim restart"] > 0
	r.mu.Unlock()
	// A restarted simulator forgot the webhooks it had queued, and one
	// given up is lost too: the drift fix is what applies them then.
	if restarted || hooks.Webhooks.Failed > 0 {
		out, err := r.runLicensor(time.Minute, "drift", "--fix", "--force")
		r.note("drift --fix (vendor-sim restarted: %v; webhooks failed since: %d): %v %.300s", restarted, hooks.Webhooks.Failed, err, out)
	}
	// A superseded create that may have reached the vendor is settled once
	// the reconciler cleared what it may have left there (after its
	// owner's lease).
	settled := func() bool {
		c := statusCounts(t, r.db, keysTable)
		var uncleared int64
		if err := r.db.Gorm.Table(keysTable).Where("status = ? AND phase = ?", "superseded", "started").Count(&uncleared).Error; err != nil {
			t.Fatal(err)
		}
		return c[idempotency.StatusPending]+c["processing"] == 0 && uncleared == 0
	}
	began := time.Now()
	if !testkit.Poll(3*time.Minute, func() bool {
		if settled() {
			return true
		}
		_, _ = r.runLicensor(time.Minute, "reconcile")
		return settled()
	}) {
		t.Errorf("intents left pending or processing after the faults: %v", statusCounts(t, r.db, keysTable))
	}
	r.note("settled in %s, intents %v", time.Since(began).Round(time.Millisecond), statusCounts(t, r.db, keysTable))
}

// observeFinal adds the last observations to the history, once everything
// settled: every consumer's list, and every license it was ever answered.
func (r *robustRun) observeFinal() {
	for ci, c := range robustConsumers {
		r.list(1000+ci, c, 0)
		for _, d := range r.domains {
			for _, id := range r.seenIDs(c, d) {
				r.showID(1000+ci, c, ci%len(r.serves), d, id)
			}
		}
	}
}

// resolveVendorDeletes adds the vendor's deletions to the history: each
// license that held the site deleted may be revoked by it from then on.
func (r *robustRun) resolveVendorDeletes() {
	r.mu.Lock()
	deletes := slices.Clone(r.deletes)
	r.mu.Unlock()
	for _, d := range deletes {
		var ids []string
		if err := r.db.Gorm.Table("licenses").Where("vendor_site_id = ?", d.site).Pluck("id", &ids).Error; err != nil {
			r.t.Fatal(err)
		}
		for _, id := range ids {
			r.record(2000, robustInput{Kind: robustVendorDelete, Domain: d.domain, ID: id, Op: r.opNumber(), Serve: -1}, robustOutput{Status: 200}, d.call, d.ret)
		}
	}
}

// resolveReservations bounds the return of each create answered 202 by
// when its intent was reserved (GET /api/operations/{id}: created_at): the
// intent is open from then on, and a revoke after it supersedes it (a
// create that was running when a revoke superseded it is answered 409
// intent_superseded, never 202). Without it a 202 could be ordered after
// a revoke it ran beside, and a create the revoke left open could bring
// the license back unseen.
func (r *robustRun) resolveReservations() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, op := range r.ops {
		in := op.Input.(robustInput)
		if in.Intent == "" {
			continue
		}
		status, _, body := sendWith(robustClient, r.serves[0].url()+"/api/operations/"+in.Intent, http.MethodGet, r.tokens[in.Consumer], "", "")
		var got struct {
			Data struct {
				CreatedAt time.Time `json:"created_at"`
			}
		}
		if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
			r.problems = append(r.problems, fmt.Sprintf("GET /api/operations/%s = %d %.200s", in.Intent, status, body))
			continue
		}
		reserved := int64(got.Data.CreatedAt.Sub(r.began)) + int64(time.Millisecond)
		r.ops[i].Return = min(op.Return, max(op.Call, reserved))
	}
}

// invariants checks what must hold once everything settled.
func (r *robustRun) invariants() {
	r.wantSitesMatchLicenses()
	r.wantNoSiteRefused()
	r.wantLicensesOfCompletedIntents()
	r.wantReplaysIdentical()
	r.wantFeedsComplete()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		r.t.Errorf("seed %d: %s", r.seed, p)
	}
}

// wantSitesMatchLicenses: each domain with an active license has one
// vendor site, that license's; a domain with none has no site; no license
// is left revoking.
func (r *robustRun) wantSitesMatchLicenses() {
	t := r.t
	lics := licensesByDomain(t, r.db)
	for _, d := range r.domains {
		var held []licenses.License
		for _, l := range lics[d] {
			switch l.Status {
			case licenses.StatusRevoked:
			case licenses.StatusRevoking:
				t.Errorf("seed %d: %s: license %s is still revoking once everything settled", r.seed, d, l.ID)
			default:
				held = append(held, l)
			}
		}
		body, err := r.simCall(http.MethodGet, "/sites?domain="+url.QueryEscape(d), "", http.StatusOK)
		var list struct{ Data []simSite }
		if err != nil || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("vendor list of %s: %v %s", d, err, body)
		}
		switch {
		case len(held) > 1:
			t.Errorf("seed %d: %s: %d licenses hold the domain: %+v", r.seed, d, len(held), held)
		case len(held) == 1 && (len(list.Data) != 1 || list.Data[0].ID != held[0].VendorSiteID):
			t.Errorf("seed %d: %s: license %s (%s) is on site %s; the vendor holds %v", r.seed, d, held[0].ID, held[0].Status, held[0].VendorSiteID, list.Data)
		case len(held) == 0 && len(list.Data) != 0:
			t.Errorf("seed %d: %s: no license holds the domain; the vendor holds %v", r.seed, d, list.Data)
		}
	}
}

// wantLicensesOfCompletedIntents: the intent that made a license is
// completed (the license row, its events and the completion commit
// together: a crash leaves both or neither).
func (r *robustRun) wantLicensesOfCompletedIntents() {
	var rows []struct{ ID, Status string }
	if err := r.db.Gorm.Raw("SELECT l.id, k.status FROM licenses l JOIN "+keysTable+" k ON k.public_id = l.intent_id WHERE k.status <> ?",
		idempotency.StatusCompleted).Scan(&rows).Error; err != nil {
		r.t.Fatal(err)
	}
	for _, row := range rows {
		r.t.Errorf("seed %d: license %s was made by an intent that is %s, not completed", r.seed, row.ID, row.Status)
	}
}

// wantNoSiteRefused: the reconciler never had a create refused by the
// vendor. The simulator refuses a create only when the domain already has
// a site, and a pending create converges on the vendor's natural key: it
// lists the domain's sites first and adopts the one it finds.
func (r *robustRun) wantNoSiteRefused() {
	var reasons []string
	if err := r.db.Gorm.Table("audit_events").Where("event = ? AND reason LIKE ?", "intent.attempted", "%(vendor_rejected)%").
		Pluck("reason", &reasons).Error; err != nil {
		r.t.Fatal(err)
	}
	if len(reasons) > 0 {
		r.t.Errorf("seed %d: the vendor refused %d of the reconciler's creates (the domain had a site it should have adopted): %v", r.seed, len(reasons), reasons)
	}
}

// wantReplaysIdentical: every 201 a key was answered is the same bytes,
// and a retry of the key now replays them, marked replayed.
func (r *robustRun) wantReplaysIdentical() {
	r.mu.Lock()
	answers := map[string][]robustAnswer{}
	for k, v := range r.answers {
		answers[k] = slices.Clone(v)
	}
	r.mu.Unlock()
	for key, as := range answers {
		first := as[0]
		for _, a := range as[1:] {
			if a.body != first.body || a.location != first.location {
				r.t.Errorf("seed %d: key %s was answered two different 201s:\n%s\n%s", r.seed, key, first.body, a.body)
			}
		}
		status, h, body := sendWith(robustClient, r.serves[0].url()+"/api/licenses", http.MethodPost, r.tokens[first.consumer], key,
			fmt.Sprintf(`{"name":%q,"domain":%q}`, first.name, first.domain))
		if status != http.StatusCreated || body != first.body || h.Get("Location") != first.location || h.Get("Idempotent-Replayed") != "true" {
			r.t.Errorf("seed %d: key %s replays %d %q (replayed %q), want the first 201 %s", r.seed, key, status, body, h.Get("Idempotent-Replayed"), first.body)
		}
	}
}

// robustEvent is an event of a consumer's feed.
type robustEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Sequence int    `json:"sequence"`
	Data     struct {
		License *apiLicense `json:"license"`
	} `json:"data"`
}

// feed reads the consumer's whole events feed.
func (r *robustRun) feed(consumer string) ([]robustEvent, error) {
	var all []robustEvent
	after := ""
	for {
		path := "/api/events?per_page=100"
		if after != "" {
			path += "&after=" + after
		}
		status, _, body := sendWith(robustClient, r.serves[0].url()+path, http.MethodGet, r.tokens[consumer], "", "")
		var page struct {
			Data []robustEvent
			Meta struct {
				HasMore   bool    `json:"has_more"`
				NextAfter *string `json:"next_after"`
			}
		}
		if status != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil {
			return nil, fmt.Errorf("GET %s = %d %.300s", path, status, body)
		}
		all = append(all, page.Data...)
		if !page.Meta.HasMore || page.Meta.NextAfter == nil {
			return all, nil
		}
		after = *page.Meta.NextAfter
	}
}

// wantFeedsComplete: each license's events in its consumer's feed are
// numbered 1, 2, … with no gap, the last one the license as the database
// holds it; and every event of acme's feed reached its webhook endpoint at
// least once, or its delivery is visibly failed.
func (r *robustRun) wantFeedsComplete() {
	t := r.t
	lics := licensesByDomain(t, r.db)
	byID := map[string]licenses.License{}
	for _, ls := range lics {
		for _, l := range ls {
			byID[l.ID] = l
		}
	}
	var last string
	ok := testkit.Poll(60*time.Second, func() bool {
		last = ""
		for _, c := range robustConsumers {
			events, err := r.feed(c)
			if err != nil {
				last = err.Error()
				return false
			}
			if msg := feedProblem(events, byID, c, r); msg != "" {
				last = msg
				return false
			}
		}
		return true
	})
	if !ok {
		t.Errorf("seed %d: the events feeds: %s", r.seed, last)
	}
	// acme's webhooks: each event delivered at least once, or failed.
	var failed []string
	if err := r.db.Gorm.Raw("SELECT e.public_id FROM webhook_deliveries d JOIN consumer_events e ON e.id = d.event_id WHERE d.status = 'failed'").
		Scan(&failed).Error; err != nil {
		t.Fatal(err)
	}
	events, err := r.feed(robustConsumers[0])
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	if !testkit.Poll(90*time.Second, func() bool {
		missing = missing[:0]
		for _, e := range events {
			if !r.hooks.got(e.ID) && !slices.Contains(failed, e.ID) {
				missing = append(missing, e.ID+" "+e.Type)
			}
		}
		return len(missing) == 0
	}) {
		t.Errorf("seed %d: %d events of %s's feed never reached its webhook endpoint nor failed: %v (deliveries %v)",
			r.seed, len(missing), robustConsumers[0], missing, statusCounts(t, r.db, "webhook_deliveries"))
	}
	r.note("%s's webhook endpoint: %d events, %d failed", robustConsumers[0], len(events), len(failed))
}

// feedProblem is what is wrong with a consumer's feed ("" when nothing):
// a license's events out of sequence, a license of the consumer without
// events, or a last event that is not the license as it is.
func feedProblem(events []robustEvent, byID map[string]licenses.License, consumer string, r *robustRun) string {
	seq := map[string]int{}
	lastOf := map[string]robustEvent{}
	for _, e := range events {
		if e.Data.License == nil {
			continue
		}
		id := e.Data.License.ID
		if e.Sequence != seq[id]+1 {
			return fmt.Sprintf("%s: license %s's event %s has sequence %d after %d", consumer, id, e.ID, e.Sequence, seq[id])
		}
		seq[id] = e.Sequence
		lastOf[id] = e
	}
	for _, d := range r.domains {
		for _, id := range r.seenIDs(consumer, d) {
			l, ok := byID[id]
			e, has := lastOf[id]
			switch {
			case !ok:
				return fmt.Sprintf("%s: license %s was answered but is not in the database", consumer, id)
			case !has:
				return fmt.Sprintf("%s: license %s has no event in the feed", consumer, id)
			case e.Data.License.Status != l.Status:
				return fmt.Sprintf("%s: license %s is %s, its last event %s says %s", consumer, id, l.Status, e.Type, e.Data.License.Status)
			}
		}
	}
	return ""
}
