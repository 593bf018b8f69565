package tests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/web"
	"github.com/licensor-api/licensor/internal/testkit"
)

// sessionCookieName is the console session's cookie (app/web).
const sessionCookieName = "licensor_console"

// An operator pastes a `*` token into the sign-in form and lands on the
// dashboard; the sign-in page and the dashboard pass the page checks.
func TestBrowserOperatorSignsIn(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	tb.checkPage("/console/login", "sign-in")
	if status := tb.signIn(s.token("ops", auth.All)); status != http.StatusOK {
		t.Fatalf("the sign-in led to a %d page", status)
	}
	if p := tb.path(); p != "/console" {
		t.Fatalf("signed in, the browser is at %s, want /console", p)
	}
	if h := tb.text("main h1"); h != "Dashboard" {
		t.Errorf("the page's heading is %q, want Dashboard", h)
	}
	if who := tb.text("header .who"); who != "ops" {
		t.Errorf("the header names %q, want the token's consumer ops", who)
	}
	tb.checkShown("dashboard")
}

// A consumer's token (licenses:read, licenses:write) cannot open the
// console: the form says so and the browser stays on the sign-in page,
// with no session cookie.
func TestBrowserConsumerTokenCannotSignIn(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	tb.expectConsoleError("status of 401") // the refused sign-in's page is a 401
	if status := tb.signIn(s.token("acme", auth.LicensesRead, auth.LicensesWrite)); status != http.StatusUnauthorized {
		t.Errorf("the refused sign-in's page is a %d, want 401", status)
	}
	tb.wantSignInPage()
	if msg := tb.text(`.error[role=alert]`); !strings.Contains(msg, "cannot open the console") {
		t.Errorf("the sign-in page says %q, want the refusal", msg)
	}
	if c := tb.cookie(sessionCookieName); c != nil {
		t.Errorf("a refused sign-in left a session cookie: %+v", c)
	}
	tb.checkShown("refused")
	if tb.open("/console"); tb.path() == "/console" {
		t.Fatal("the dashboard opened without a session")
	}
	tb.wantSignInPage()
}

// A session cookie whose payload was changed (its end moved a day on,
// its signature kept) is no session: the browser is sent to sign in.
func TestBrowserForgedSessionIsRefused(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	tb.signIn(s.token("ops", auth.All))
	real := tb.cookie(sessionCookieName)
	if real == nil {
		t.Fatal("no session cookie after signing in")
	}
	tb.setCookie(sessionCookieName, forgeSession(t, real.Value, func(se map[string]any) {
		se["e"] = se["e"].(float64) + 86400
	}))
	tb.open("/console")
	tb.wantSignInPage()
	// A cookie made up whole, signature and all, fares no better.
	tb.setCookie(sessionCookieName, "eyJ0IjoiMDFIIiwiYyI6IjAxSCIsImkiOjEsImUiOjk5OTk5OTk5OTksIm4iOiJ4In0.c2lnbmF0dXJl")
	tb.open("/console")
	tb.wantSignInPage()
	tb.checkShown("forged")
}

// forgeSession decodes a session cookie's payload, lets change alter it, and
// encodes it again beside the original signature.
func forgeSession(t *testing.T, value string, change func(map[string]any)) string {
	t.Helper()
	payload, sig, ok := strings.Cut(value, ".")
	if !ok {
		t.Fatalf("the session cookie %q is not payload.signature", value)
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	var se map[string]any
	if err := json.Unmarshal(raw, &se); err != nil {
		t.Fatal(err)
	}
	change(se)
	raw, _ = json.Marshal(se)
	return base64.RawURLEncoding.EncodeToString(raw) + "." + sig
}

// A session past CONSOLE_SESSION_TTL is refused, though the browser still
// sends its cookie (the server's clock moved on; the browser's did not).
func TestBrowserExpiredSessionIsRefused(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	s := newConsoleSite(t, withClock(clk))
	tb := s.newTab(t)
	tb.signIn(s.token("ops", auth.All))
	clk.Advance(web.DefaultSessionTTL - time.Minute)
	if tb.open("/console"); tb.path() != "/console" {
		t.Fatalf("a session within its time was refused: the browser is at %s", tb.path())
	}
	clk.Advance(2 * time.Minute)
	tb.open("/console")
	tb.wantSignInPage()
}

// Revoking the token a session was opened with ends the session at once:
// the next page the browser asks for is the sign-in page.
func TestBrowserRevokedTokenEndsItsSession(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	issued := s.issued("ops", auth.All)
	tb.signIn(issued.Secret)
	if p := tb.path(); p != "/console" {
		t.Fatalf("signed in, the browser is at %s", p)
	}
	if err := s.auth.Revoke(context.Background(), audit.Console(), issued.ID); err != nil {
		t.Fatal(err)
	}
	tb.do(chromedp.Reload())
	tb.wantSignInPage()
}

// Signing out ends the session on the server: another browser holding a
// copy of its cookie is sent to the sign-in page on its next page.
func TestBrowserSignOutEndsACopiedSession(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	tb.signIn(s.token("ops", auth.All))
	other := s.newTab(t) // another browser (its own cookies), given a copy of the session's cookie
	other.setCookie("licensor_console", tb.cookie("licensor_console").Value)
	if other.open("/console"); other.path() != "/console" {
		t.Fatalf("the copied cookie opens no session: the browser is at %s", other.path())
	}
	tb.submit(`form.logout button[type=submit]`)
	tb.wantSignInPage()
	other.do(chromedp.Reload())
	other.wantSignInPage()
}

// A form sent without its CSRF token is refused with the 419 page, and
// the session it would have changed is still open.
func TestBrowserFormWithoutCSRFTokenIsRefused(t *testing.T) {
	s := newConsoleSite(t)
	tb := s.newTab(t)
	tb.signIn(s.token("ops", auth.All))
	tb.expectConsoleError("status of 419")
	tb.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('form.logout input[name="_token"]').remove()`))
	if status := tb.submit(`form.logout button[type=submit]`); status != 419 {
		t.Fatalf("the sign-out form without _token led to a %d page, want 419", status)
	}
	if h := tb.text("main h1"); !strings.Contains(h, "419") || !strings.Contains(h, "Page Expired") {
		t.Errorf("the page's heading is %q, want 419 · Page Expired", h)
	}
	tb.checkShown("419")
	if tb.open("/console"); tb.path() != "/console" {
		t.Errorf("the refused sign-out ended the session: the browser is at %s", tb.path())
	}
	// The same form with its token signs out.
	tb.submit(`form.logout button[type=submit]`)
	tb.wantSignInPage()
}

// cookie is the tab's cookie name for the site, or nil.
func (tb *tab) cookie(name string) *network.Cookie {
	tb.t.Helper()
	res, err := chromedp.Call(tb.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{tb.site.url + "/console"}})
	if err != nil {
		tb.t.Fatalf("read cookies: %v", err)
	}
	for _, c := range res.Cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// setCookie sets a console cookie in the tab's browser context, as a
// browser's user (or an attacker with the disk) could.
func (tb *tab) setCookie(name, value string) {
	tb.t.Helper()
	_, err := chromedp.Call(tb.ctx, network.SetCookie, network.SetCookieParams{
		Name: name, Value: value, URL: tb.site.url + "/console", Path: "/console",
		HTTPOnly: new(true), SameSite: network.CookieSameSiteStrict,
	})
	if err != nil {
		tb.t.Fatalf("set cookie %s: %v", name, err)
	}
}
