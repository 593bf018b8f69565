package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
)

// tourPage is one console page of the tour: its path and its screenshot's name.
type tourPage struct{ path, name string }

// tourSite is a site with something on every page: acme's license (its
// create's intent completed; a webhook's event), a create whose vendor answer was lost (its
// intent pending), a webhook endpoint whose delivery is failing, and an
// operator token; pages lists every console page, filled.
func tourSite(t *testing.T) (*consoleSite, auth.Issued, []tourPage) {
	t.Helper()
	s := newConsoleSite(t, withPrivateWebhooks())
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(down.Close)
	acme := s.hooks("acme")
	endpoint := s.endpoint(acme, `{"url":"`+down.URL+`/hooks/acme","events":["license.created"],"description":"acme's shop"}`)["id"].(string)
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
	return s, ops, []tourPage{
		{"/console", "dashboard"},
		{"/console/intents", "intents"},
		{"/console/intents?status=pending", "intents-pending"},
		{"/console/intents/" + pending, "intent-pending"},
		{"/console/intents/" + done.Ref(), "intent-completed"},
		{"/console/licenses", "licenses"},
		{"/console/licenses?domain=acme", "licenses-search"},
		{"/console/licenses/" + license, "license"},
		{"/console/tokens", "tokens"},
		{"/console/tokens/events", "token-events"},
		{"/console/tokens/" + ops.ID + "/events", "token-trail"},
		{"/console/webhooks", "webhooks"},
		{"/console/webhooks/endpoints/" + endpoint, "webhook-endpoint"},
	}
}

// Every console page, filled, passes the page checks (a title, a lang, a
// label on every field, a name on every button and link, a main landmark,
// no console error) and is screenshot; then again on a phone's screen,
// where no page may be wider than the screen (its tables scroll in their
// own box).
func TestBrowserEveryPagePassesThePageChecks(t *testing.T) {
	s, ops, pages := tourSite(t)
	tb := s.newTab(t)
	tb.checkPage("/console/login", "sign-in")
	tb.onPhone(func() { tb.checkPhonePage("/console/login", "sign-in") })
	tb.signIn(ops.Secret)
	for _, p := range pages {
		tb.checkPage(p.path, p.name)
	}
	tb.expectConsoleError("status of 404")
	if status := tb.open("/console/intents/01JDQ8Z7F0A2B4C6D8E0G2H4J6"); status != http.StatusNotFound {
		t.Errorf("an unknown intent's page is a %d, want 404", status)
	}
	tb.checkShown("404")
	tb.onPhone(func() {
		for _, p := range pages {
			tb.checkPhonePage(p.path, p.name)
		}
	})
}

// onPhone runs f with the tab's screen a phone's (390 by 844, mobile).
func (tb *tab) onPhone(f func()) {
	tb.t.Helper()
	tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	f()
	if _, err := chromedp.Call(tb.ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{}); err != nil {
		tb.t.Fatalf("back from the phone's screen: %v", err)
	}
}

// checkPhonePage checks a page as checkPage does, on a phone's screen,
// and that the page is no wider than the screen.
func (tb *tab) checkPhonePage(path, name string) {
	tb.t.Helper()
	tb.checkPage(path, name+"-phone")
	if w := tabRun(tb, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); w[0] > w[1] {
		tb.t.Errorf("%s is %dpx wide on a %dpx phone screen", path, w[0], w[1])
	}
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
