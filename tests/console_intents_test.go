package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// intentRecord is the intent with that public id, as stored.
func (a *app) intentRecord(id string) idempotency.Record {
	a.t.Helper()
	var rec idempotency.Record
	if err := a.db.Gorm.Where("public_id = ?", id).Take(&rec).Error; err != nil {
		a.t.Fatalf("intent %s: %v", id, err)
	}
	return rec
}

// intentAudit is the operators' part of the intent's audit trail (the
// reconciler's attempts left out), oldest first.
func (a *app) intentAudit(id string) []audit.Event {
	a.t.Helper()
	var events []audit.Event
	err := a.db.Gorm.Where("subject_type = ? AND subject_id = ? AND event <> ?", audit.SubjectIntent, id, audit.IntentAttempted).Order("id").Find(&events).Error
	if err != nil {
		a.t.Fatal(err)
	}
	return events
}

// The intents page lists a pending intent with its operation, consumer,
// status, attempts, age and next attempt; its filters narrow it by status,
// consumer (a name nobody has lists nothing), operation and age, and a
// value none of the form's choices is the form's 422.
func TestConsoleListsIntentsWithFilters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
		a := newApp(t, db, withClock(clk))
		a.vendor.script("POST", reply{status: 500, body: `{}`})
		id := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(a.consumer("acme"), "order-1")...).pendingOperation()
		b, _ := consoleAs(t, a, "ops", auth.IntentsManage)
		clk.Advance(7 * time.Minute)

		row := `<a class="mono" href="/console/intents/` + id + `">` + id + `</a>`
		b.get("/console/intents").wantStatus(t, http.StatusOK, "<title>Intents · licensor console</title>", row,
			"<td>licenses.store</td>", `<td><span class="clip" title="acme">acme</span></td>`, `<span class="status status-pending">pending</span>`, "<td>1</td>", ">7m</td>")
		for _, q := range []string{"status=pending", "consumer=acme", "operation=licenses.store", "age=5m", "status=pending&consumer=acme&age=5m"} {
			b.get("/console/intents?"+q).wantStatus(t, http.StatusOK, row)
		}
		for _, q := range []string{"status=completed", "consumer=globex", "consumer=nobody", "operation=licenses.destroy", "age=15m"} {
			p := b.get("/console/intents?"+q).wantStatus(t, http.StatusOK, "No intent matches these filters.")
			if strings.Contains(p.Body, id) {
				t.Errorf("?%s lists the intent", q)
			}
		}
		b.get("/console/intents?consumer=nobody").wantStatus(t, http.StatusOK, `value="nobody"`)
		for q, field := range map[string]string{"status=stuck": "statuses", "operation=licenses.nuke": "operations", "age=2m": "ages"} {
			b.get("/console/intents?"+q).wantStatus(t, http.StatusUnprocessableEntity, "Choose one of the "+field+" listed.")
		}
	})
}

// The list is paginated, oldest first, and its page links keep the filters.
func TestConsoleIntentsPagesKeepTheFilters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.token("acme", auth.LicensesWrite)
		for i := range 51 {
			a.plantRecord("acme", "k-"+string(rune('a'+i/26))+string(rune('a'+i%26)), acmeBody, idempotency.StatusCompleted, 0)
		}
		var first, last idempotency.Record
		a.db.Gorm.Order("id").First(&first)
		a.db.Gorm.Order("id DESC").First(&last)
		b, _ := consoleAs(t, a, "ops", auth.IntentsManage)

		p := b.get("/console/intents?status=completed&consumer=acme").wantStatus(t, http.StatusOK,
			ptr.Deref(first.PublicID), "Page 1 of 2 · 51 in all", `href="/console/intents?consumer=acme&amp;page=2&amp;status=completed"`)
		if strings.Contains(p.Body, ptr.Deref(last.PublicID)) {
			t.Error("page 1 lists the 51st intent")
		}
		p = b.get("/console/intents?status=completed&consumer=acme&page=2").wantStatus(t, http.StatusOK,
			ptr.Deref(last.PublicID), "Page 2 of 2", `href="/console/intents?consumer=acme&amp;page=1&amp;status=completed"`)
		if strings.Contains(p.Body, ptr.Deref(first.PublicID)) {
			t.Error("page 2 lists the first intent")
		}
	})
}

// A failed intent's page shows its facts and its history (created by which
// token, in which request), and offers retry and discard. Retrying it from
// the page (with the session's form token) puts it back to pending, with
// its intent.retried event naming the signed-in token and the request; the
// page says so. Once the reconciler completes it, its page shows the result
// and links the license it made, with its domain and status.
func TestConsoleRetriesAFailedIntent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		acme := a.issued("acme", auth.LicensesRead, auth.LicensesWrite)
		id := a.failIntent(append(bearer(acme.Secret), "X-Request-Id", "req-create"), "order-7", acmeBody, clk)
		b, ops := consoleAs(t, a, "ops", auth.IntentsManage)

		b.get("/console/intents/"+id).wantStatus(t, http.StatusOK, "<title>Intent "+id+" · licensor console</title>",
			`<span class="status status-failed">failed</span>`, "<dd>licenses.store</dd>", "acme", "Created",
			acme.ID, "req-create", "<strong>Attempt 2</strong> <span class=\"status status-failed\">failed</span>",
			"(vendor unavailable); next attempt at", "by the reconciler", `action="/console/intents/`+id+`/retry"`, `action="/console/intents/`+id+`/discard"`,
			`<label for="reason">`, "This intent names no license (yet).")

		// Without the form token: refused, nothing changed.
		b.post("/console/intents/"+id+"/retry", url.Values{"_token": {""}}).wantStatus(t, 419, "Page Expired")
		if rec := a.intentRecord(id); rec.Status != idempotency.StatusFailed {
			t.Fatalf("a retry without its form token moved the intent to %s", rec.Status)
		}
		p := b.post("/console/intents/"+id+"/retry", url.Values{}, "X-Request-Id", "req-console-retry")
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/intents/"+id+"?done=retried" {
			t.Fatalf("retry: %d to %q: %s", p.Status, p.Header.Get("Location"), p.Body)
		}
		if rec := a.intentRecord(id); rec.Status != idempotency.StatusPending || rec.Attempts != 0 {
			t.Errorf("after the retry: %s, %d attempts; want pending, 0", rec.Status, rec.Attempts)
		}
		events := a.intentAudit(id)
		if len(events) != 1 || events[0].Event != audit.IntentRetried || events[0].Actor != audit.ActorToken ||
			ptr.Deref(events[0].ActorTokenID) != ops.ID || ptr.Deref(events[0].ActorConsumerID) != ops.ConsumerID || ptr.Deref(events[0].RequestID) != "req-console-retry" {
			t.Fatalf("audit trail = %+v, want intent.retried by the session's token in req-console-retry", events)
		}
		b.get("/console/intents/"+id+"?done=retried").wantStatus(t, http.StatusOK,
			"Intent retried: the reconciler takes it on its next pass.", "Retried", "req-console-retry", ops.ID)

		// A retry of an intent that is not failed is the error page's 409.
		b.post("/console/intents/"+id+"/retry", url.Values{}).wantStatus(t, http.StatusConflict, "Only a failed intent can be retried")

		clk.Advance(settle) // old enough for the reconciler to create what it does not find
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile after the retry: %q, want completed", got)
		}
		rec := a.intentRecord(id)
		lic := ptr.Deref(rec.ResourceID)
		p = b.get("/console/intents/"+id).wantStatus(t, http.StatusOK, `<span class="status status-completed">completed</span>`, "answered 201",
			"<strong>Attempt 1</strong> <span class=\"status status-completed\">completed</span>", "completed: the effect was found or made",
			`<a class="mono" href="/console/licenses/`+lic+`">`+lic+`</a>`, "<dd>acme.test</dd>", `<span class="status status-active">active</span>`)
		if strings.Contains(p.Body, "/retry\"") || strings.Contains(p.Body, "/discard\"") {
			t.Error("a completed intent's page offers retry or discard")
		}
	})
}

// Discarding from the page: a reason that is refused shows the page again
// with the error beside the field (422) and what was typed; a valid one
// settles the intent for good with its intent.discarded event (reason,
// signed-in token, request). A second discard is the error page's 409.
func TestConsoleDiscardsAFailedIntentWithAReason(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		id := a.failIntent(a.consumer("acme"), "order-8", acmeBody, clk)
		b, ops := consoleAs(t, a, "ops", auth.IntentsManage)
		b.get("/console/intents/" + id)

		b.post("/console/intents/"+id+"/discard", url.Values{"reason": {"   "}}).wantStatus(t, http.StatusUnprocessableEntity,
			`<p class="field-error" id="reason-error">The reason field is required.</p>`, `action="/console/intents/`+id+`/discard"`)
		long := strings.Repeat("é", audit.MaxReason+1)
		b.post("/console/intents/"+id+"/discard", url.Values{"reason": {long}}).wantStatus(t, http.StatusUnprocessableEntity,
			"must not be greater than 500 characters.", ">"+long+"</textarea>")
		if rec := a.intentRecord(id); rec.Status != idempotency.StatusFailed || len(a.intentAudit(id)) != 0 {
			t.Fatalf("a refused reason changed the intent: %s", rec.Status)
		}

		p := b.post("/console/intents/"+id+"/discard", url.Values{"reason": {" the customer cancelled "}}, "X-Request-Id", "req-console-discard")
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/intents/"+id+"?done=discarded" {
			t.Fatalf("discard: %d to %q: %s", p.Status, p.Header.Get("Location"), p.Body)
		}
		if rec := a.intentRecord(id); rec.Status != idempotency.StatusDiscarded {
			t.Errorf("after the discard: %s", rec.Status)
		}
		events := a.intentAudit(id)
		if len(events) != 1 || events[0].Event != audit.IntentDiscarded || ptr.Deref(events[0].Reason) != "the customer cancelled" ||
			ptr.Deref(events[0].ActorTokenID) != ops.ID || ptr.Deref(events[0].RequestID) != "req-console-discard" {
			t.Fatalf("audit trail = %+v, want intent.discarded by the session's token, with its reason", events)
		}
		if strings.Contains(a.logs.String(), "customer cancelled") {
			t.Error("the reason reached the log")
		}
		b.get("/console/intents/"+id+"?done=discarded").wantStatus(t, http.StatusOK, "Intent discarded", "Discarded",
			"reason: the customer cancelled", `<span class="status status-discarded">discarded</span>`)

		b.post("/console/intents/"+id+"/discard", url.Values{"reason": {"again"}}).wantStatus(t, http.StatusConflict,
			"Only a failed or abandoned intent can be discarded")
		b.post("/console/intents/"+id+"/retry", url.Values{}).wantStatus(t, http.StatusConflict, "Only a failed intent can be retried")
	})
}

// The intents' pages and actions ask intents:manage, as the API's routes
// do: a session of a token without it gets 403 and changes nothing; an
// unknown intent is the error page's 404.
func TestConsoleIntentsAskIntentsManage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		id := a.failIntent(a.consumer("acme"), "order-9", acmeBody, clk)
		tokensOnly, _ := consoleAs(t, a, "ops", auth.TokensManage)
		tokensOnly.get("/console")
		for _, path := range []string{"/console/intents", "/console/intents/" + id} {
			tokensOnly.get(path).wantStatus(t, http.StatusForbidden, "Your token does not carry the ability this page needs.")
		}
		for _, path := range []string{"/console/intents/" + id + "/retry", "/console/intents/" + id + "/discard"} {
			tokensOnly.post(path, url.Values{"reason": {"no"}}).wantStatus(t, http.StatusForbidden)
		}
		if rec := a.intentRecord(id); rec.Status != idempotency.StatusFailed || len(a.intentAudit(id)) != 0 {
			t.Errorf("a session without intents:manage changed the intent: %s", rec.Status)
		}

		ops, _ := consoleAs(t, a, "ops", auth.IntentsManage)
		ops.get("/console/intents/01NOSUCHINTENT000000000000").wantStatus(t, http.StatusNotFound, "Not Found")
		ops.get("/console/intents")
		ops.post("/console/intents/01NOSUCHINTENT000000000000/retry", url.Values{}).wantStatus(t, http.StatusNotFound)
		ops.post("/console/intents/01NOSUCHINTENT000000000000/discard", url.Values{"reason": {"gone"}}).wantStatus(t, http.StatusNotFound)

		// Signed out, a page sends the browser to sign in.
		newConsoleClientOn(t, ops.srv).get("/console/intents").wantSignIn(t)
	})
}

// A failed revoke's page offers retry, not discard (it is retried, never
// discarded), and says why; a discard posted anyway is the error page's
// 409, and nothing changes.
func TestConsoleOffersNoDiscardOfARevoke(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.consumer("acme")
		const key = "01JDQ8Z7F0A2B4C6D8E0G2H4J6"
		a.plantRecord("acme", key, "", idempotency.StatusFailed, time.Hour)
		if err := db.Gorm.Model(&idempotency.Record{}).Where("idempotency_key = ?", key).Update("operation", "licenses.destroy").Error; err != nil {
			t.Fatal(err)
		}
		id := ptr.Deref(a.record(key).PublicID)
		b, _ := consoleAs(t, a, "ops", auth.IntentsManage)

		p := b.get("/console/intents/"+id).wantStatus(t, http.StatusOK, `action="/console/intents/`+id+`/retry"`, "is retried, never discarded")
		if strings.Contains(p.Body, `/discard"`) {
			t.Error("a failed revoke's page offers to discard it")
		}
		b.post("/console/intents/"+id+"/discard", url.Values{"reason": {"stuck"}}).wantStatus(t, http.StatusConflict, "A revoke is retried, never discarded")
		if rec := a.intentRecord(id); rec.Status != idempotency.StatusFailed || len(a.intentAudit(id)) != 0 {
			t.Errorf("a refused discard of a revoke: %s", rec.Status)
		}
	})
}
