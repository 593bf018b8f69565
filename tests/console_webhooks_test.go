package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// hookRig is two consumers with an endpoint each: acme's answers 500 (its
// delivery pending after a failed attempt), globex's 204 (delivered).
type hookRig struct {
	a                    *app
	clk                  *testkit.Clock
	acmeURL, globexURL   string
	acmeEP, globexEP     string
	acmeSecret           string
	failing, delivered   webhooks.Delivery
	acmeToken, globexTok []string
}

func newHookRig(t *testing.T, db *testdb.DB) *hookRig {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	r := &hookRig{a: newApp(t, db, withPrivateWebhooks(), withClock(clk)), clk: clk}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(down.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(up.Close)
	r.acmeURL, r.globexURL = down.URL+"/hooks/acme", up.URL+"/hooks/globex"
	r.acmeToken, r.globexTok = r.a.hooks("acme"), r.a.hooks("globex")
	created := r.a.endpoint(r.acmeToken, `{"url":"`+r.acmeURL+`","events":["license.created"],"description":"acme's shop"}`)
	r.acmeEP, r.acmeSecret = created["id"].(string), created["secret"].(string)
	r.globexEP = r.a.endpoint(r.globexTok, `{"url":"`+r.globexURL+`"}`)["id"].(string)
	r.a.create(r.acmeToken, "acme.test")
	r.a.create(r.globexTok, "globex.test")
	r.a.dispatch()
	if _, err := r.a.app.Webhooks.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.failing, r.delivered = r.only(t, r.acmeEP), r.only(t, r.globexEP)
	if r.failing.Status != webhooks.StatusPending || r.failing.Attempts != 1 || r.delivered.Status != webhooks.StatusDelivered {
		t.Fatalf("the rig's deliveries: %+v and %+v", r.failing, r.delivered)
	}
	return r
}

// only is the endpoint's one delivery.
func (r *hookRig) only(t *testing.T, endpointID string) webhooks.Delivery {
	t.Helper()
	var ds []webhooks.Delivery
	if err := r.a.db.Gorm.Where("endpoint_id = ?", endpointID).Find(&ds).Error; err != nil || len(ds) != 1 {
		t.Fatalf("deliveries of %s: %+v, %v", endpointID, ds, err)
	}
	return ds[0]
}

// The webhooks page lists every consumer's endpoints (consumer, URL, event
// types, state, failing since) and the failing deliveries (event type,
// endpoint, attempts, the last error, next attempt) with a Retry button
// each; never a secret, and not a delivered one.
func TestConsoleWebhooksShowEndpointsAndFailingDeliveries(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newHookRig(t, db)
		cc, _ := consoleAs(t, r.a, "ops", auth.IntentsManage)
		page := cc.get("/console/webhooks").wantStatus(t, http.StatusOK, "1 failing: 0 failed for good, 1 pending after a failed attempt.")
		if strings.Contains(page.Body, r.acmeSecret) || strings.Contains(page.Body, webhooks.SecretPrefix) {
			t.Fatalf("the webhooks page shows a secret")
		}
		acme := sectionRow(t, page.Body, "endpoint-"+r.acmeEP)
		wantAll(t, "acme's endpoint row", acme, "acme", r.acmeURL, "license.created", "acme&#39;s shop",
			`status-enabled">enabled`, `status-failing">failing`, "since 2026-12-01 10:00:00 UTC")
		if globex := sectionRow(t, page.Body, "endpoint-"+r.globexEP); !strings.Contains(globex, "globex") || strings.Contains(globex, "failing") {
			t.Errorf("globex's endpoint row: %s", globex)
		}
		failing := sectionRow(t, page.Body, "delivery-"+r.failing.ID)
		wantAll(t, "the failing delivery's row", failing, "acme", r.acmeURL, "license.created", `status-pending">pending`, "HTTP 500", webhooks.FailureHTTPStatus,
			`action="/console/webhooks/deliveries/`+r.failing.ID+`/retry"`)
		if strings.Contains(page.Body, `id="delivery-`+r.delivered.ID+`"`) {
			t.Errorf("a delivered delivery is listed as failing")
		}

		only := cc.get("/console/webhooks?consumer=globex").wantStatus(t, http.StatusOK)
		if strings.Contains(only.Body, r.acmeEP) || !strings.Contains(only.Body, r.globexEP) || !strings.Contains(only.Body, "No delivery is failing") {
			t.Errorf("?consumer=globex shows another's, or a failing delivery")
		}
		if none := cc.get("/console/webhooks?consumer=nobody").wantStatus(t, http.StatusOK); !strings.Contains(none.Body, "No consumer is named nobody") {
			t.Errorf("?consumer=nobody does not say so")
		}

		// A failed delivery, and a disabled endpoint, say so.
		if err := db.Gorm.Model(&webhooks.Delivery{}).Where("id = ?", r.failing.ID).Updates(map[string]any{"status": webhooks.StatusFailed, "next_attempt_at": nil}).Error; err != nil {
			t.Fatal(err)
		}
		r.a.do(http.MethodPatch, "/api/webhook-endpoints/"+r.globexEP, `{"enabled":false}`, r.globexTok...).wantStatus(http.StatusOK)
		page = cc.get("/console/webhooks").wantStatus(t, http.StatusOK, "1 failing: 1 failed for good, 0 pending after a failed attempt.")
		if row := sectionRow(t, page.Body, "delivery-"+r.failing.ID); !strings.Contains(row, `status-failed">failed`) {
			t.Errorf("a failed delivery's row: %s", row)
		}
		if row := sectionRow(t, page.Body, "endpoint-"+r.globexEP); !strings.Contains(row, `status-disabled">disabled`) {
			t.Errorf("a disabled endpoint's row: %s", row)
		}
	})
}

// An endpoint's page shows it (never its secret) and its deliveries with
// each attempt; an id that is none is 404, an unknown status 422.
func TestConsoleWebhookEndpointShowsDeliveriesAndAttempts(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newHookRig(t, db)
		cc, _ := consoleAs(t, r.a, "ops", auth.IntentsManage)
		page := cc.get("/console/webhooks/endpoints/"+r.acmeEP).wantStatus(t, http.StatusOK)
		if strings.Contains(page.Body, r.acmeSecret) || strings.Contains(page.Body, webhooks.SecretPrefix) {
			t.Fatalf("the endpoint page shows its secret")
		}
		wantAll(t, "the endpoint page", page.Body, r.acmeURL, "acme&#39;s shop", "license.created")
		row := sectionRow(t, page.Body, "delivery-"+r.failing.ID)
		wantAll(t, "the delivery's row", row, "2026-12-01 10:00:00 UTC: HTTP 500 in", webhooks.FailureHTTPStatus, `status-pending">pending`, "/retry")
		if body := cc.get("/console/webhooks/endpoints/"+r.acmeEP+"?status=delivered").wantStatus(t, http.StatusOK).Body; strings.Contains(body, r.failing.ID) {
			t.Errorf("?status=delivered lists a pending delivery")
		}
		cc.get("/console/webhooks/endpoints/"+r.acmeEP+"?status=bogus").wantStatus(t, http.StatusUnprocessableEntity)
		cc.get("/console/webhooks/endpoints/01JDQ8Z7F0A2B4C6D8E0G2H4J6").wantStatus(t, http.StatusNotFound)
		cc.get("/console/webhooks/endpoints/nope").wantStatus(t, http.StatusNotFound)
	})
}

// Retry makes the delivery due now by the session's token (in the audit
// trail), then shows its endpoint; one in flight is 409; an unknown one
// 404; a form without its CSRF token 419.
func TestConsoleRetriesAWebhookDelivery(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newHookRig(t, db)
		cc, ops := consoleAs(t, r.a, "ops", auth.IntentsManage)
		cc.get("/console/webhooks")
		r.clk.Advance(time.Second) // past the attempt, within its backoff
		cc.post("/console/webhooks/deliveries/"+r.failing.ID+"/retry", url.Values{"_token": {""}}).wantStatus(t, 419)
		if d := r.only(t, r.acmeEP); !d.NextAttemptAt.After(r.clk.Now()) {
			t.Fatalf("a retry without its CSRF token made the delivery due: %+v", d)
		}
		page := cc.post("/console/webhooks/deliveries/"+r.failing.ID+"/retry", nil).wantStatus(t, http.StatusSeeOther)
		if loc := page.Header.Get("Location"); loc != "/console/webhooks/endpoints/"+r.acmeEP+"?done=retried" {
			t.Errorf("Location = %q", loc)
		}
		d := r.only(t, r.acmeEP)
		if d.Status != webhooks.StatusPending || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(r.clk.Now()) || !d.WindowStart.Equal(r.clk.Now()) {
			t.Errorf("retried delivery = %+v, want pending, due now, a new window", d)
		}
		var evs []audit.Event
		if err := db.Gorm.Where("event = ? AND subject_id = ?", audit.WebhookDeliveryRetried, d.ID).Find(&evs).Error; err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Actor != audit.ActorToken || evs[0].ActorTokenID == nil || *evs[0].ActorTokenID != ops.ID {
			t.Errorf("the retry's audit events = %+v, want one by the session's token %s", evs, ops.ID)
		}
		if body := cc.get("/console/webhooks/endpoints/" + r.acmeEP + "?done=retried").Body; !strings.Contains(body, `class="flash"`) {
			t.Errorf("no notice after the retry")
		}

		if err := db.Gorm.Model(&webhooks.Delivery{}).Where("id = ?", d.ID).
			Updates(map[string]any{"claim": "worker-1", "next_attempt_at": r.clk.Now().Add(time.Minute)}).Error; err != nil {
			t.Fatal(err)
		}
		cc.post("/console/webhooks/deliveries/"+d.ID+"/retry", nil).wantStatus(t, http.StatusConflict, "being sent right now")
		cc.post("/console/webhooks/deliveries/01JDQ8Z7F0A2B4C6D8E0G2H4J6/retry", nil).wantStatus(t, http.StatusNotFound)
		cc.post("/console/webhooks/deliveries/nope/retry", nil).wantStatus(t, http.StatusNotFound)
	})
}

// The webhooks pages ask intents:manage, as GET /api/webhook-deliveries:
// a tokens:manage session gets 403 and retries nothing.
func TestConsoleWebhooksNeedIntentsManage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newHookRig(t, db)
		cc, _ := consoleAs(t, r.a, "ops", auth.TokensManage)
		if body := cc.get("/console").Body; strings.Contains(body, `href="/console/webhooks"`) {
			t.Errorf("the navigation offers Webhooks to a session without intents:manage")
		}
		cc.get("/console/webhooks").wantStatus(t, http.StatusForbidden)
		cc.get("/console/webhooks/endpoints/"+r.acmeEP).wantStatus(t, http.StatusForbidden)
		cc.post("/console/webhooks/deliveries/"+r.failing.ID+"/retry", nil).wantStatus(t, http.StatusForbidden)
		var evs []audit.Event
		if err := db.Gorm.Where("event = ?", audit.WebhookDeliveryRetried).Find(&evs).Error; err != nil || len(evs) != 0 {
			t.Errorf("a session without intents:manage retried: %+v, %v", evs, err)
		}
	})
}

// The failing deliveries are found and counted in all as the dashboard
// counts them, however many deliveries are pending beside them: one failing
// delivery older than 200 pending ones is listed, for every consumer and
// for its own.
func TestConsoleWebhooksCountFailingBeyondThoseListed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newHookRig(t, db)
		// 200 newer deliveries owed to acme, never tried (their events need not
		// exist for this count).
		owed := make([]webhooks.Delivery, 200)
		for i := range owed {
			at := r.clk.Now().Add(time.Duration(i+1) * time.Second)
			owed[i] = webhooks.Delivery{ID: fmt.Sprintf("01JDQ8Z7F0A2B4C6D8E0G2H%03d", i), EndpointID: r.acmeEP, EventID: uint64(1_000_000 + i),
				ConsumerID: r.failing.ConsumerID, Status: webhooks.StatusPending, NextAttemptAt: &at, WindowStart: at, CreatedAt: at, UpdatedAt: at}
		}
		if err := db.Gorm.Create(&owed).Error; err != nil {
			t.Fatal(err)
		}
		cc, _ := consoleAs(t, r.a, "ops", auth.IntentsManage)
		page := cc.get("/console/webhooks").wantStatus(t, http.StatusOK)
		if !strings.Contains(page.Body, "1 failing: 0 failed for good, 1 pending after a failed attempt.") ||
			!strings.Contains(page.Body, `id="delivery-`+r.failing.ID+`"`) {
			t.Errorf("every consumer's failing deliveries are not found or counted: %s", page.Body)
		}
		acme := cc.get("/console/webhooks?consumer=acme").wantStatus(t, http.StatusOK)
		if !strings.Contains(acme.Body, "1 failing.") || !strings.Contains(acme.Body, `id="delivery-`+r.failing.ID+`"`) {
			t.Errorf("acme's failing delivery is not found among its pending ones: %s", acme.Body)
		}
	})
}
