package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/internal/ptr"
)

// tourPage is one console page of the tour: its path and its screenshot's name.
type tourPage struct{ path, name string }

// tour is a site with something on every page: acme's license (its
// create's intent completed), a create whose vendor answer was lost (its
// intent pending), a webhook endpoint whose delivery of the license's
// event is failing (its server answers 500 until hookUp), and an operator
// token; pages lists every console page, filled.
type tour struct {
	*consoleSite
	ops    auth.Issued
	pages  []tourPage
	hookUp *atomic.Bool
}

func tourSite(t *testing.T) *tour {
	t.Helper()
	s := newConsoleSite(t, withPrivateWebhooks())
	up := &atomic.Bool{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if up.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(hook.Close)
	acme := s.hooks("acme")
	endpoint := s.endpoint(acme, `{"url":"`+hook.URL+`/hooks/acme","events":["license.created"],"description":"acme's shop"}`)["id"].(string)
	license := s.create(acme, "acme.test")
	s.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
	pending := s.do(http.MethodPost, "/api/licenses", `{"name":"B","domain":"b.test"}`, keyed(acme, "order-tour")...).pendingOperation()
	s.dispatch()
	if _, err := s.app.app.Webhooks.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	var done idempotency.Record
	if err := s.db.Gorm.Where("status = ?", idempotency.StatusCompleted).First(&done).Error; err != nil {
		t.Fatalf("the completed create's intent: %v", err)
	}
	ops, err := s.auth.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: "ops", Abilities: []string{auth.All}, Name: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	return &tour{consoleSite: s, ops: ops, hookUp: up, pages: []tourPage{
		{"/console", "dashboard"},
		{"/console/intents", "intents"},
		{"/console/intents?status=pending", "intents-pending"},
		{"/console/intents/" + pending, "intent-pending"},
		{"/console/intents/" + ptr.Deref(done.PublicID), "intent-completed"},
		{"/console/licenses", "licenses"},
		{"/console/licenses?domain=acme", "licenses-search"},
		{"/console/licenses/" + license, "license"},
		{"/console/tokens", "tokens"},
		{"/console/tokens/events", "token-events"},
		{"/console/tokens/" + ops.ID + "/events", "token-trail"},
		{"/console/webhooks", "webhooks"},
		{"/console/webhooks/endpoints/" + endpoint, "webhook-endpoint"},
	}}
}

// Every console page, filled, passes the page checks (a title, a lang, a
// label on every field, a name on every button and link, a main landmark,
// no console error) and is screenshot; then again on a phone's screen,
// where no page may be wider than the screen (its tables scroll in their
// own box).
func TestBrowserEveryPagePassesThePageChecks(t *testing.T) {
	s := tourSite(t)
	tb := s.newTab(t)
	tb.checkPage("/console/login", "sign-in")
	tb.onPhone(func() { tb.checkPhonePage("/console/login", "sign-in") })
	tb.signIn(s.ops.Secret)
	for _, p := range s.pages {
		tb.checkPage(p.path, p.name)
	}
	tb.expectConsoleError("status of 404")
	if status := tb.open("/console/intents/01JDQ8Z7F0A2B4C6D8E0G2H4J6"); status != http.StatusNotFound {
		t.Errorf("an unknown intent's page is a %d, want 404", status)
	}
	tb.checkShown("404")
	tb.onPhone(func() {
		for _, p := range s.pages {
			tb.checkPhonePage(p.path, p.name)
		}
	})
}

// A session whose token lacks a page's ability gets the 403 page, which
// passes the page checks too, and its navigation offers only what it may
// open.
func TestBrowserPageWithoutItsAbilityIs403(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	tb.signIn(s.token("issuer", auth.TokensManage))
	tb.expectConsoleError("status of 403")
	if status := tb.open("/console/intents"); status != http.StatusForbidden {
		t.Fatalf("a tokens:manage session opened the intents page: %d, want 403", status)
	}
	tb.checkShown("403")
	if nav := tb.text(`nav[aria-label="Sections"]`); nav != "Dashboard\nTokens" {
		t.Errorf("a tokens:manage session's navigation offers %q, want Dashboard and Tokens", nav)
	}
}

// An operator retries a failing webhook delivery from the webhooks page
// (confirming): the endpoint's page says it is due now, and once its
// server answers again and a worker sends it, the page shows it delivered.
func TestBrowserFailingDeliveryIsRetried(t *testing.T) {
	s := tourSite(t)
	tb := s.newTab(t)
	tb.signIn(s.ops.Secret)
	tb.open("/console/webhooks")
	if status := tb.submit(`tr[id^="delivery-"] form[action$="/retry"] button[type=submit]`); status != http.StatusOK {
		t.Fatalf("the retry led to a %d page", status)
	}
	if d := tb.lastDialog(); !strings.Contains(d, "again now") {
		t.Errorf("the retry asked %q, want its confirmation", d)
	}
	if p := tb.path(); !strings.HasPrefix(p, "/console/webhooks/endpoints/") || !strings.HasSuffix(p, "?done=retried") {
		t.Errorf("the retry led to %s, want the endpoint's page with its notice", p)
	}
	if flash := tb.text(".flash"); !strings.HasPrefix(flash, "Delivery retried") {
		t.Errorf("the flash says %q", flash)
	}
	if got := tb.text(`tbody .status`); got != "pending" {
		t.Errorf("the retried delivery shows %q, want pending", got)
	}
	tb.checkShown("retried")
	s.hookUp.Store(true)
	if _, err := s.app.app.Webhooks.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb.do(chromedp.Reload())
	if got := tb.text(`tbody .status`); got != "delivered" {
		t.Errorf("the delivery shows %q once sent, want delivered", got)
	}
	tb.checkShown("delivered")
}
