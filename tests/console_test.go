package tests

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/activity"
	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// setCookie is the cookie name a response set, nil if none.
func setCookie(p consolePage, name string) *http.Cookie {
	for _, ck := range (&http.Response{Header: p.Header}).Cookies() {
		if ck.Name == name {
			return ck
		}
	}
	return nil
}

func TestConsoleSignInOpensASessionForOperatorTokens(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		for _, abilities := range [][]string{{auth.All}, {auth.TokensManage}, {auth.IntentsManage}} {
			t.Run(strings.Join(abilities, ","), func(t *testing.T) {
				cc := newConsoleClient(t, a)
				cc.get("/console").wantSignIn(t)
				signed := cc.trySignIn(a.token("ops", abilities...))
				if signed.Status != http.StatusSeeOther || signed.Header.Get("Location") != "/console" {
					t.Fatalf("sign in: %d %q", signed.Status, signed.Header.Get("Location"))
				}
				ck := setCookie(signed, "licensor_console")
				if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" || ck.MaxAge <= 0 {
					t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/console, a Max-Age", ck)
				}
				if ck.Secure {
					t.Errorf("session cookie is Secure in %s, served over http", config.EnvTesting)
				}
				cc.get("/console").wantStatus(t, http.StatusOK, "Sign out")
			})
		}
	})
}

func TestConsoleSessionCookieIsSecureOutsideLocal(t *testing.T) {
	db := testdb.New(t, "sqlite")
	a := newApp(t, db, withConfig(func(c *config.Config) { c.Console.SecureCookie = true }))
	cc := newConsoleClient(t, a)
	if ck := setCookie(cc.trySignIn(a.token("ops", auth.All)), "licensor_console"); ck == nil || !ck.Secure {
		t.Fatalf("session cookie = %+v, want Secure", ck)
	}
}

func TestConsoleRefusesConsumerAndDeadTokens(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		revoked := a.issued("ops", auth.All)
		if err := a.auth.Revoke(context.Background(), audit.Console(), revoked.ID); err != nil {
			t.Fatal(err)
		}
		cases := map[string]string{
			"consumer token": a.token("acme", auth.LicensesRead, auth.LicensesWrite, auth.WebhooksManage),
			"revoked token":  revoked.Secret,
			"not a token":    "not-a-token",
			"empty":          "",
			"forged":         badSignature(a.token("ops", auth.All)),
		}
		for name, tok := range cases {
			t.Run(name, func(t *testing.T) {
				cc := newConsoleClient(t, a)
				page := cc.trySignIn(tok).wantStatus(t, http.StatusUnauthorized)
				if !strings.Contains(page.Body, "cannot open the console") || setCookie(page, "licensor_console") != nil {
					t.Fatalf("refused sign-in: %s", page.Body)
				}
				cc.get("/console").wantSignIn(t)
			})
		}
		if strings.Contains(a.logs.String(), revoked.Secret) || !strings.Contains(a.logs.String(), "console sign-in refused") {
			t.Errorf("failed sign-ins are logged, never with the token: %s", a.logs.String())
		}
	})
}

// badSignature changes the last character of a token's signature.
func badSignature(token string) string {
	last := token[len(token)-1]
	repl := byte('A')
	if last == 'A' {
		repl = 'B'
	}
	return token[:len(token)-1] + string(repl)
}

func TestConsoleSessionEndsWithItsToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		cc, tok := consoleAs(t, a, "ops", auth.All)
		cc.get("/console").wantStatus(t, http.StatusOK)
		if err := a.auth.Revoke(context.Background(), audit.Console(), tok.ID); err != nil {
			t.Fatal(err)
		}
		cc.get("/console").wantSignIn(t)
	})
}

func TestConsoleSessionIsBoundedInTime(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	db := testdb.New(t, "sqlite")
	a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Console.SessionTTL = time.Hour }))
	cc, _ := consoleAs(t, a, "ops", auth.All)
	clk.Advance(59 * time.Minute)
	cc.get("/console").wantStatus(t, http.StatusOK)
	clk.Advance(time.Minute)
	cc.get("/console").wantSignIn(t)

	// A token that expires before the session would: the session ends with it.
	issued, err := a.auth.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: "ops", Abilities: []string{auth.All}, TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cc.signIn(issued.Secret)
	clk.Advance(10 * time.Minute)
	cc.get("/console").wantSignIn(t)
}

func TestConsoleRefusesAForgedSession(t *testing.T) {
	db := testdb.New(t, "sqlite")
	a := newApp(t, db)
	cc, _ := consoleAs(t, a, "ops", auth.IntentsManage)
	u, _ := url.Parse(cc.srv.URL + "/console")
	payload, sig, _ := strings.Cut(cc.sessionCookie().Value, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	// Another token's id, the signature kept: a session for a token never signed in.
	other := a.issued("ops", auth.All).ID
	forged := strings.Replace(string(raw), `"t":"`, `"t":"`+other+`","x":"`, 1)
	for name, v := range map[string]string{
		"payload changed":   base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + sig,
		"signature dropped": payload,
		"signature changed": payload + "." + base64.RawURLEncoding.EncodeToString([]byte("not the signature")),
	} {
		t.Run(name, func(t *testing.T) {
			forger := newConsoleClientOn(t, cc.srv)
			forger.http.Jar.SetCookies(u, []*http.Cookie{{Name: "licensor_console", Value: v, Path: "/console"}})
			forger.get("/console").wantSignIn(t)
		})
	}
}

func TestConsoleFormsNeedTheirCSRFToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		cc, _ := consoleAs(t, a, "ops", auth.All)
		cc.get("/console")
		// A token one character off the session's: "x" in place of its first,
		// or "y" where that is "x" already (1 in 64 tokens), or the forgery
		// would be the real token.
		forged := "x" + cc.csrf[1:]
		if forged == cc.csrf {
			forged = "y" + cc.csrf[1:]
		}
		for name, tok := range map[string]string{"none": "", "another session's": forged} {
			t.Run(name, func(t *testing.T) {
				page := cc.post("/console/logout", url.Values{"_token": {tok}}).wantStatus(t, 419)
				if !strings.Contains(page.Body, "Page Expired") || !strings.Contains(page.Header.Get("Content-Type"), "text/html") {
					t.Fatalf("419 page: %s", page.Body)
				}
				cc.get("/console").wantStatus(t, http.StatusOK) // still signed in
			})
		}
		// The sign-in form has a token of its own.
		fresh := newConsoleClientOn(t, cc.srv)
		fresh.get("/console/login")
		fresh.post("/console/login", url.Values{"token": {a.token("ops", auth.All)}, "_token": {""}}).wantStatus(t, 419)
		// A post from another site is refused, even with the token.
		req, _ := http.NewRequest(http.MethodPost, cc.srv.URL+"/console/logout", strings.NewReader(url.Values{"_token": {cc.csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		res, err := cc.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 419 {
			t.Errorf("cross-site post: %d, want 419", res.StatusCode)
		}
		cc.post("/console/logout", nil).wantStatus(t, http.StatusSeeOther)
		cc.get("/console").wantSignIn(t)
	})
}

func TestConsoleSignInIsRateLimited(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	db := testdb.New(t, "sqlite")
	a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Console.LoginsPerMinute = 3 }))
	cc := newConsoleClient(t, a)
	for range 3 {
		cc.trySignIn("wrong").wantStatus(t, http.StatusUnauthorized)
	}
	page := cc.trySignIn(a.token("ops", auth.All)).wantStatus(t, http.StatusTooManyRequests)
	if page.Header.Get("Retry-After") == "" || setCookie(page, "licensor_console") != nil {
		t.Fatalf("429 without Retry-After, or with a session: %v", page.Header)
	}
	clk.Advance(time.Minute)
	cc.signIn(a.token("ops", auth.All))
	if !strings.Contains(a.logs.String(), "too many attempts") {
		t.Errorf("the refusal is not logged: %s", a.logs.String())
	}
}

func TestConsolePagesAreLockedDown(t *testing.T) {
	db := testdb.New(t, "sqlite")
	a := newApp(t, db)
	cc := newConsoleClient(t, a)
	for _, path := range []string{"/console/login", "/console", "/console/no-such-page"} {
		page := cc.get(path)
		h := page.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	cc.signIn(a.token("ops", auth.All))
	page := cc.get("/console/no-such-page").wantStatus(t, http.StatusNotFound)
	if !strings.Contains(page.Header.Get("Content-Type"), "text/html") || !strings.Contains(page.Body, "<html lang=\"en\">") {
		t.Errorf("a console 404 is a page: %s", page.Body)
	}
	// The API is untouched: JSON errors, form bodies read as JSON.
	a.do(http.MethodGet, "/api/nope", "").wantStatus(http.StatusNotFound).json()
}

func TestConsoleSignInGoesBackToItsPageOnThisSiteOnly(t *testing.T) {
	db := testdb.New(t, "sqlite")
	a := newApp(t, db)
	tok := a.token("ops", auth.All)
	for next, want := range map[string]string{
		"/console/intents?status=pending": "/console/intents?status=pending",
		"//evil.test/console":             "/console",
		"https://evil.test/console":       "/console",
		"/console.evil.test":              "/console",
		"/console/\\evil":                 "/console",
	} {
		cc := newConsoleClient(t, a)
		cc.get("/console/login?next=" + url.QueryEscape(next))
		page := cc.post("/console/login", url.Values{"token": {tok}, "next": {next}})
		if got := page.Header.Get("Location"); got != want {
			t.Errorf("next %q: Location %q, want %q", next, got, want)
		}
	}
}

func TestConsoleCanBeTurnedOff(t *testing.T) {
	db := testdb.New(t, "sqlite")
	a := newApp(t, db, withConfig(func(c *config.Config) { c.Console.Disabled = true }))
	a.do(http.MethodGet, "/console/login", "").wantStatus(http.StatusNotFound).json()
}

func TestConsoleDashboardCountsIntents(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now().UTC().Truncate(time.Second))
		a := newApp(t, db, withClock(clk))
		acme := a.consumer("acme")
		a.vendor.script("POST", reply{status: 500, body: `{}`, commit: true})
		a.do(http.MethodPost, "/api/licenses", `{"name":"P","domain":"p.test"}`, keyed(acme, "k-pending")...).pendingOperation()
		a.do(http.MethodPost, "/api/licenses", `{"name":"C","domain":"c.test"}`, keyed(acme, "k-completed")...).wantStatus(http.StatusCreated)
		a.do(http.MethodPost, "/api/licenses", `{"name":"C","domain":"c.test"}`, keyed(acme, "k-completed")...).wantStatus(http.StatusCreated)
		a.plantRecord("acme", "k-failed", acmeBody, idempotency.StatusFailed, -time.Minute)
		clk.Advance(90 * time.Minute)

		cc, _ := consoleAs(t, a, "ops", auth.IntentsManage)
		cc.get("/console").wantStatus(t, http.StatusOK,
			`<span class="n">1</span><span class="l">pending intents</span>`,
			`<span class="n">1h 30m</span><span class="l">oldest pending</span>`,
			`<span class="n">1</span><span class="l">failed intents</span>`,
			`<span class="status status-completed">completed</span></a></td><td>1</td>`,
			`<span class="status status-discarded">discarded</span></a></td><td>0</td>`,
			// The charts, from the counts licensor keeps: one create, one replay, one 202.
			`<strong>Licenses created</strong> <span class="muted">1 in 24 h, at most 1 an hour</span>`,
			`<strong>Replays</strong> <span class="muted">1 in 24 h`,
			`<strong>Pending answers (202)</strong> <span class="muted">1 in 24 h`,
			`<strong>Conflicts (409, 422)</strong> <span class="muted">0 in 24 h</span>`,
			`drift mismatches (no check yet)`)
		if err := a.app.Activity.Set(context.Background(), activity.DriftMismatches, 3); err != nil {
			t.Fatal(err)
		}
		checked := clk.Now().UTC().Format("2006-01-02 15:00 UTC")
		clk.Advance(2 * time.Hour)
		cc.get("/console").wantStatus(t, http.StatusOK,
			`<span class="n">3</span><span class="l">drift mismatches at the last check, in the hour from `+checked+`</span>`)
		// A tokens:manage session sees no intent: that needs intents:manage.
		tokensOnly, _ := consoleAs(t, a, "ops", auth.TokensManage)
		if page := tokensOnly.get("/console").wantStatus(t, http.StatusOK); strings.Contains(page.Body, "pending intents") {
			t.Errorf("a tokens:manage session sees the intents: %s", page.Body)
		}
	})
}

// With the database gone, a console page is the 503 page (Retry-After, the
// console's headers, none of the database's words), never a 500; a sign-in
// is refused the same way.
func TestConsoleDatabaseGoneIsA503Page(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	cc, _ := consoleAs(t, a, "ops", auth.All)
	tok := a.token("ops", auth.All)
	if err := a.auth.Flush(context.Background()); err != nil { // the sign-in's use, written while it can be
		t.Fatal(err)
	}
	for _, pool := range []*gorm.DB{a.db.Gorm, a.db.Read} {
		sqlDB, err := pool.DB()
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.Close()
	}
	for _, page := range []consolePage{cc.get("/console"), cc.get("/console/intents"), cc.trySignIn(tok)} {
		page.wantStatus(t, http.StatusServiceUnavailable)
		if page.Header.Get("Retry-After") == "" || page.Header.Get("Content-Security-Policy") == "" ||
			!strings.Contains(page.Body, "temporarily unavailable") || strings.Contains(strings.ToLower(page.Body), "sql") {
			t.Errorf("503 page: %v %s", page.Header, page.Body)
		}
	}
}
