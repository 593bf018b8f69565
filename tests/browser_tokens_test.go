package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/internal/testkit"
)

// issueInBrowser fills the tokens page's issue form (consumer, one
// ability, a name) and sends it; it returns the new token's string, read
// from the one-time box, and its id.
func (tb *tab) issueInBrowser(consumer, ability, name string) (secret, id string) {
	tb.t.Helper()
	tb.open("/console/tokens")
	tb.do(
		chromedp.SetValue(chromedp.ID("issue-consumer"), consumer),
		chromedp.Click(chromedp.ID("ability-"+strings.ReplaceAll(ability, ":", "-"))),
		chromedp.SetValue(chromedp.ID("issue-name"), name),
	)
	if status := tb.submit(`form[action="/console/tokens"][method="post"] button[type=submit]`); status != http.StatusCreated {
		tb.t.Fatalf("issuing led to a %d page: %s", status, tb.text("main"))
	}
	secret = tabRun(tb, chromedp.Value(chromedp.ID("new-token")))
	id = tb.text(`label[for="new-token"] code`)
	if secret == "" || id == "" {
		tb.t.Fatalf("the issued token's box shows %q (id %q)", secret, id)
	}
	return secret, id
}

// An operator issues a token and sees it once: the page after the form
// shows the token (a live one, for the consumer and ability asked, issued
// by the session's token), with a Copy button; the token list, loaded
// again, lists the new token but holds its string nowhere in its HTML.
func TestBrowserIssuedTokenIsShownOnce(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	ops := s.issued("ops", auth.All)
	tb.signIn(ops.Secret)
	secret, id := tb.issueInBrowser("acme-ci", auth.LicensesRead, "ci deploys")
	p, err := s.auth.Verify(context.Background(), secret)
	if err != nil || p.TokenID != id || p.Consumer != "acme-ci" || !p.Abilities.Can(auth.LicensesRead) || p.Abilities.Can(auth.LicensesWrite) {
		t.Fatalf("the token shown verifies as %+v (%v), want token %s of acme-ci with licenses:read alone", p, err, id)
	}
	if warn := tb.text(".issued .warning"); !strings.Contains(warn, "will not be shown again") {
		t.Errorf("the issued token's box warns %q", warn)
	}
	tb.checkShown("issued")
	if !strings.Contains(tb.text(`#token-`+id), ops.ID) {
		t.Errorf("the list's row of the new token does not name its issuer %s: %q", ops.ID, tb.text(`#token-`+id))
	}
	tb.allowClipboard()
	tb.do(chromedp.Click(chromedp.CSS(`button[data-copy="new-token"]`)))
	copied := testkit.Poll(5*time.Second, func() bool { return tb.text(`button[data-copy="new-token"]`) == "Copied" })
	if !copied { // the clipboard's promise settles after the click
		t.Errorf("the Copy button says %q after a click, want Copied", tb.text(`button[data-copy="new-token"]`))
	}
	if got := tabRun(tb, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise)); got != secret {
		t.Errorf("the clipboard holds %q after Copy, want the token", got)
	}

	tb.checkPage("/console/tokens", "list")
	parts := strings.Split(secret, ".")
	if html := tb.html(); strings.Contains(html, secret) || strings.Contains(html, parts[len(parts)-1]) {
		t.Fatal("the token list, loaded again, holds the token's string (or its signature)")
	}
	if row := tb.text(`#token-` + id); !strings.Contains(row, "ci deploys") || !strings.Contains(row, "acme-ci") {
		t.Errorf("the list's row of the new token says %q", row)
	}
}

// An operator revokes a token from the tokens page, and the console
// session opened with that token, in another browser, ends at its next
// page.
func TestBrowserRevokedTokenSignsItsBrowserOut(t *testing.T) {
	s := newConsoleSite(t)
	admin := s.newTab(t)
	admin.signIn(s.token("ops", auth.All))
	secret, id := admin.issueInBrowser("night-shift", auth.IntentsManage, "night shift")

	other := s.newTab(t) // another browser: cookies of its own
	if status := other.signIn(secret); status != http.StatusOK || other.path() != "/console" {
		t.Fatalf("the new token's sign-in led to a %d page at %s", status, other.path())
	}
	if who := other.text("header .who"); who != "night-shift" {
		t.Fatalf("the second browser is signed in as %q", who)
	}

	admin.open("/console/tokens")
	if status := admin.submit(`#token-` + id + ` form[action$="/revoke"] button[type=submit]`); status != http.StatusOK {
		t.Fatalf("the revoke led to a %d page", status)
	}
	if d := admin.lastDialog(); !strings.Contains(d, "Revoke the token “night shift” of night-shift?") {
		t.Errorf("the revoke asked %q, want its confirmation naming the token", d)
	}
	if got := admin.text(`#token-` + id + ` .status`); got != "revoked" {
		t.Errorf("the revoked token's row shows %q", got)
	}
	admin.checkShown("revoked")

	other.do(chromedp.Reload())
	other.wantSignInPage()
	other.screenshot("signed-out")
}

// allowClipboard lets the tab's pages write and read the clipboard, as an
// operator's browser asked for it would.
func (tb *tab) allowClipboard() {
	tb.t.Helper()
	bc := chromedp.FromContext(tb.ctx).BrowserContextID
	for _, name := range []string{"clipboard-write", "clipboard-read"} {
		_, err := chromedp.CallBrowser(tb.ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted,
			Origin: tb.site.url, BrowserContextID: bc,
		})
		if err != nil {
			tb.t.Fatalf("grant %s: %v", name, err)
		}
	}
}
