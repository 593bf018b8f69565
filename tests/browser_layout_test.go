package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
)

// longSite is a console whose tables are filled with cells as long as the
// API lets them be: a consumer name of 181 characters without a blank, a
// license for a 131-character domain, a webhook endpoint with a URL of
// about 1500 characters and a 500-character description, whose delivery
// is failing, a pending intent, and tokens with every ability, a
// 255-character name and "Issued by" filled (issued by an operator's
// token, of a long-named consumer too). It returns the site, the
// operator's token (*) and the console pages that have tables.
func longSite(t *testing.T) (*consoleSite, auth.Issued, []tourPage) {
	t.Helper()
	s := newConsoleSite(t, withPrivateWebhooks())
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(hook.Close)
	consumer := "acme-" + strings.Repeat("longconsumername", 11)
	acme := s.hooks(consumer)
	url := hook.URL + "/hooks/" + strings.Repeat("a-very-long-path-segment/", 60)
	description := strings.Repeat("described-at-length-", 25)
	endpoint := s.endpoint(acme, fmt.Sprintf(`{"url":%q,"events":["license.created","license.revoked","license.suspended"],"description":%q}`, url, description))["id"].(string)
	domain := strings.Repeat("l", 63) + "." + strings.Repeat("m", 61) + ".test"
	license := s.create(acme, domain)
	s.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
	s.do(http.MethodPost, "/api/licenses", `{"name":"B","domain":"b.test"}`, keyed(acme, "order-long")...).pendingOperation()
	s.dispatch()
	if _, err := s.app.app.Webhooks.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops, err := s.auth.Issue(ctx, audit.Console(), auth.IssueInput{Consumer: "operations-" + strings.Repeat("team", 40), Abilities: []string{auth.All}, Name: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	by := audit.ByToken(ops.ConsumerID, ops.ID, "req-layout")
	var issued auth.Issued
	for i := range 3 {
		issued, err = s.auth.Issue(ctx, by, auth.IssueInput{
			Consumer:  consumer,
			Abilities: []string{auth.LicensesRead, auth.LicensesWrite, auth.WebhooksManage},
			Name:      fmt.Sprintf("%d-", i) + strings.Repeat("a-token-name-", 19),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s, ops, []tourPage{
		{"/console", "dashboard"},
		{"/console/licenses", "licenses"},
		{"/console/licenses/" + license, "license"},
		{"/console/intents", "intents"},
		{"/console/tokens", "tokens"},
		{"/console/tokens/events", "token-events"},
		{"/console/tokens/" + issued.ID + "/events", "token-trail"},
		{"/console/webhooks", "webhooks"},
		{"/console/webhooks/endpoints/" + endpoint, "webhook-endpoint"},
	}
}

// layoutReport is what a page says about its tables' actions and its
// charts' labels.
type layoutReport struct {
	Actions   int      `json:"actions"`   // the buttons and links of the page's tables
	Hidden    []string `json:"hidden"`    // those not wholly in view
	PageWide  bool     `json:"pageWide"`  // the page scrolls sideways
	Labels    int      `json:"labels"`    // the charts' text elements
	SmallText []string `json:"smallText"` // those drawn under 11px
}

// layoutScript reads a page's layoutReport. Each action of a table is
// brought into view by scrolling the window up or down only (never
// sideways, never a table's own box); its box must then lie inside the
// viewport and inside every ancestor that clips its overflow. A chart
// label's size is its font size times the SVG's scale on the screen.
const layoutScript = `(() => {
  const describe = (el) => el.outerHTML.slice(0, 100);
  const vw = document.documentElement.clientWidth, vh = document.documentElement.clientHeight;
  const hidden = [];
  const actions = [...document.querySelectorAll('main table button, main table a[href], main table input[type=submit]')];
  for (const el of actions) {
    let r = el.getBoundingClientRect();
    window.scrollTo(0, window.scrollY + r.top - vh / 2);
    r = el.getBoundingClientRect();
    const why = [];
    if (r.width < 1 || r.height < 1) why.push('no size');
    if (r.left < -0.5 || r.right > vw + 0.5 || r.top < -0.5 || r.bottom > vh + 0.5) {
      why.push('outside the ' + vw + 'x' + vh + ' viewport at ' + [r.left, r.top, r.right, r.bottom].map(Math.round).join(','));
    }
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
      const b = a.getBoundingClientRect();
      if (r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5) {
        why.push('clipped by <' + a.tagName.toLowerCase() + ' class="' + a.className + '"> (' + Math.round(b.left) + '-' + Math.round(b.right) + ')');
      }
    }
    if (why.length) hidden.push(describe(el) + ': ' + why.join('; '));
  }
  window.scrollTo(0, 0);
  const labels = [...document.querySelectorAll('.chart svg text')];
  const small = labels.map((el) => {
    const px = parseFloat(getComputedStyle(el).fontSize) * el.getScreenCTM().a;
    return px < 11 ? el.textContent + ': ' + px.toFixed(1) + 'px' : '';
  }).filter(Boolean);
  return {
    actions: actions.length, hidden,
    pageWide: document.documentElement.scrollWidth > vw,
    labels: labels.length, smallText: small,
  };
})()`

// At 1280×800 and 1920×1080, with cells as long as the API allows, every
// button and link of every table of every console page is in view without
// scrolling sideways (not off the window, not cut by a table's scrolling
// box), no page scrolls sideways, and the charts' labels are drawn at 11px
// or more. The Webhooks and Tokens pages are screenshot at 1280×800.
func TestBrowserLayoutKeepsEveryActionInView(t *testing.T) {
	s, ops, pages := longSite(t)
	tb := s.newTab(t)
	tb.signIn(ops.Secret)
	defer func() {
		if _, err := chromedp.Call(tb.ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{}); err != nil {
			t.Errorf("back from the emulated screen: %v", err)
		}
	}()
	for _, size := range [][2]int64{{1280, 800}, {1920, 1080}} {
		tb.do(chromedp.EmulateViewport(size[0], size[1]))
		screen := fmt.Sprintf("%dx%d", size[0], size[1])
		for _, p := range pages {
			if status := tb.open(p.path); status != http.StatusOK {
				t.Fatalf("GET %s = %d", p.path, status)
			}
			r := tabRun(tb, chromedp.Evaluate[layoutReport](layoutScript))
			if r.Actions == 0 && p.name != "dashboard" && p.name != "license" { // a license's tables list events only
				t.Errorf("%s at %s: no button or link in a table: the page is not filled", p.path, screen)
			}
			for _, h := range r.Hidden {
				t.Errorf("%s at %s: an action is out of view: %s", p.path, screen, h)
			}
			if r.PageWide {
				t.Errorf("%s at %s: the page scrolls sideways", p.path, screen)
			}
			if p.name == "dashboard" && r.Labels == 0 {
				t.Errorf("%s at %s: no chart label", p.path, screen)
			}
			for _, l := range r.SmallText {
				t.Errorf("%s at %s: a chart label is under 11px: %s", p.path, screen, l)
			}
			if size[0] == 1280 && (p.name == "webhooks" || p.name == "tokens" || p.name == "dashboard") {
				tb.screenshot(screen + "-" + p.name)
			}
		}
	}
}
