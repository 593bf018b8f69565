package tests

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/tests/testdb"
)

var newTokenArea = regexp.MustCompile(`(?s)<textarea id="new-token"[^>]*readonly[^>]*>([^<]+)</textarea>`)

// Issuing a token shows it once (201, never cached, in a read-only field
// with a copy button and a warning); it works, it is issued by the session's
// token and in the audit trail as such, and no later page shows it.
func TestConsoleIssuesATokenAndShowsItOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		cc, admin := consoleAs(t, a, "ops", auth.TokensManage)
		cc.get("/console/tokens").wantStatus(t, http.StatusOK)
		page := cc.post("/console/tokens", url.Values{"consumer": {"acme"}, "abilities[]": {auth.LicensesRead, auth.WebhooksManage},
			"name": {"billing"}, "expires_in": {"720h"}}).wantStatus(t, http.StatusCreated)
		if cc := page.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q, want no-store", cc)
		}
		m := newTokenArea.FindStringSubmatch(page.Body)
		if m == nil {
			t.Fatalf("no read-only token field: %s", page.Body)
		}
		secret := html.UnescapeString(strings.TrimSpace(m[1]))
		wantAll(t, "the issued page", page.Body, `<button type="button" data-copy="new-token">Copy</button>`, "will not be shown again")
		p, err := a.auth.Verify(context.Background(), secret)
		if err != nil {
			t.Fatalf("the token shown does not verify: %v", err)
		}
		row := tokenRow(t, a, p.TokenID)
		if row.Consumer.Name != "acme" || row.Name != "billing" || strings.Join(row.Abilities, ",") != "licenses:read,webhooks:manage" {
			t.Errorf("issued row = %+v", row)
		}
		if row.IssuedBy == nil || *row.IssuedBy != admin.ID {
			t.Errorf("issued_by = %v, want the session's token %s", row.IssuedBy, admin.ID)
		}
		if d := row.ExpiresAt.Sub(row.CreatedAt); d.Hours() != 720 {
			t.Errorf("lifetime = %v, want 720h", d)
		}
		evs := tokenEventsOf(t, a, p.TokenID)
		if len(evs) != 1 || evs[0].Event.Event != audit.TokenIssued || evs[0].Actor != audit.ActorToken ||
			evs[0].ActorTokenID == nil || *evs[0].ActorTokenID != admin.ID || evs[0].ActorConsumer != "ops" {
			t.Errorf("audit events = %+v, want token.issued by the session's token", evs)
		}
		again := cc.get("/console/tokens").wantStatus(t, http.StatusOK)
		if strings.Contains(again.Body, secret) || strings.Contains(again.Body, "new-token") {
			t.Errorf("the token list shows the token again")
		}
		if !strings.Contains(sectionRow(t, again.Body, "token-"+p.TokenID), "<code>"+admin.ID+`</code><span class="clip" title="ops">ops</span>`) {
			t.Errorf("the list does not name the issuer of the new token")
		}
	})
}

// A tokens:manage session may grant the consumer abilities only, as the
// API's: asking for an admin ability is a 403 that names it, and nothing is
// issued. A * session may grant it.
func TestConsoleIssueRefusesAbilitiesTheSessionMayNotGrant(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		cc, ops := consoleAs(t, a, "ops", auth.TokensManage)
		form := cc.get("/console/tokens").wantStatus(t, http.StatusOK)
		if !strings.Contains(form.Body, `value="tokens:manage"`) || !strings.Contains(form.Body, "needs a * token") {
			t.Errorf("the form does not offer every ability, marking the admin ones")
		}
		page := cc.post("/console/tokens", url.Values{"consumer": {"rogue"}, "abilities[]": {auth.LicensesRead, auth.TokensManage}}).
			wantStatus(t, http.StatusForbidden)
		api := a.do(http.MethodPost, "/api/tokens", issueBody(t, "rogue", auth.LicensesRead, auth.TokensManage), bearer(ops.Secret)...).
			wantError(http.StatusForbidden, "ability_not_grantable")["message"].(string)
		if !strings.Contains(html.UnescapeString(page.Body), api) || !strings.Contains(page.Body, `value="rogue"`) {
			t.Errorf("the 403 does not say what the API says (%q), or loses the form: %s", api, page.Body)
		}
		if n := len(mustList(t, a, "rogue")); n != 0 {
			t.Errorf("%d tokens issued", n)
		}
		root, _ := consoleAs(t, a, "root", auth.All)
		root.get("/console/tokens")
		root.post("/console/tokens", url.Values{"consumer": {"ops2"}, "abilities[]": {auth.TokensManage}}).wantStatus(t, http.StatusCreated)
	})
}

// The body's rules and auth's own are the API's: each failing field's
// message beside it, at 422, the form as it was sent.
func TestConsoleIssueShowsFieldErrors(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.issued("Acme", auth.LicensesRead)
		cc, _ := consoleAs(t, a, "ops", auth.TokensManage)
		cc.get("/console/tokens")
		cases := []struct {
			name string
			form url.Values
			want map[string]string // the field error's id → a part of its message
		}{
			{"empty", url.Values{"name": {"kept name"}}, map[string]string{
				"issue-consumer-error": "The consumer field is required.", "issue-abilities-error": "The abilities field is required."}},
			{"unknown ability and bad lifetime", url.Values{"consumer": {"x"}, "abilities[]": {"root:everything"}, "expires_in": {"soon"}},
				map[string]string{"issue-abilities-error": "The selected abilities.0 is invalid.",
					"issue-expires-error": "The expires in field must be a positive duration such as 720h."}},
			{"too long a lifetime", url.Values{"consumer": {"x"}, "abilities[]": {auth.LicensesRead}, "expires_in": {"100000h"}},
				map[string]string{"issue-expires-error": "must not be greater than"}},
			{"a consumer differing only in case", url.Values{"consumer": {"acme"}, "abilities[]": {auth.LicensesRead}},
				map[string]string{"issue-consumer-error": "already exists"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				page := cc.post("/console/tokens", tc.form).wantStatus(t, http.StatusUnprocessableEntity)
				for id, msg := range tc.want {
					re := regexp.MustCompile(`<p class="field-error" id="` + id + `">([^<]*)</p>`)
					m := re.FindStringSubmatch(page.Body)
					if m == nil || !strings.Contains(html.UnescapeString(m[1]), msg) {
						t.Errorf("%s: got %v, want %q", id, m, msg)
					}
				}
				if v := tc.form.Get("name"); v != "" && !strings.Contains(page.Body, `value="`+v+`"`) {
					t.Errorf("the form lost its name %q", v)
				}
			})
		}
		if n := len(mustList(t, a, "x")); n != 0 {
			t.Errorf("%d tokens issued for x", n)
		}
	})
}

// A form without its CSRF token is refused (419) and changes nothing.
func TestConsoleTokenFormsNeedTheirCSRFToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		victim := a.issued("shop", auth.LicensesRead)
		cc, _ := consoleAs(t, a, "ops", auth.All)
		cc.get("/console/tokens")
		cc.post("/console/tokens", url.Values{"_token": {""}, "consumer": {"x"}, "abilities[]": {auth.LicensesRead}}).wantStatus(t, 419)
		cc.post("/console/tokens/"+victim.ID+"/revoke", url.Values{"_token": {""}}).wantStatus(t, 419)
		if tokenRow(t, a, victim.ID).RevokedAt != nil {
			t.Errorf("a revoke without its CSRF token revoked the token")
		}
		if n := len(mustList(t, a, "x")); n != 0 {
			t.Errorf("an issue without its CSRF token issued %d tokens", n)
		}
	})
}

// Revoke revokes, by the session's token in the audit trail, then shows the
// list with a notice; an unknown id is 404.
func TestConsoleRevokesAToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		victim := a.issued("shop", auth.LicensesRead)
		cc, admin := consoleAs(t, a, "ops", auth.TokensManage)
		cc.get("/console/tokens")
		page := cc.post("/console/tokens/"+victim.ID+"/revoke", nil).wantStatus(t, http.StatusSeeOther)
		if loc := page.Header.Get("Location"); loc != "/console/tokens?done=revoked" {
			t.Errorf("Location = %q", loc)
		}
		if tokenRow(t, a, victim.ID).RevokedAt == nil {
			t.Fatalf("the token is not revoked")
		}
		if _, err := a.auth.Verify(context.Background(), victim.Secret); err == nil {
			t.Errorf("the revoked token still verifies")
		}
		evs := tokenEventsOf(t, a, victim.ID)
		if len(evs) != 2 || evs[0].Event.Event != audit.TokenRevoked || evs[0].ActorTokenID == nil || *evs[0].ActorTokenID != admin.ID {
			t.Errorf("audit events = %+v, want token.revoked by the session's token first", evs)
		}
		list := cc.get("/console/tokens?done=revoked").wantStatus(t, http.StatusOK)
		if !strings.Contains(list.Body, `class="flash"`) || !strings.Contains(sectionRow(t, list.Body, "token-"+victim.ID), "revoked") {
			t.Errorf("the list after a revoke: %s", list.Body)
		}
		cc.post("/console/tokens/01ARZ3NDEKTSV4RRFFQ69G5FAV/revoke", nil).wantStatus(t, http.StatusNotFound)
	})
}

// Revoking the session's own token ends the session: the next page sends
// the browser to sign in.
func TestConsoleRevokingTheSessionsTokenSignsOut(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		cc, own := consoleAs(t, a, "ops", auth.TokensManage)
		page := cc.get("/console/tokens").wantStatus(t, http.StatusOK)
		if !strings.Contains(sectionRow(t, page.Body, "token-"+own.ID), "your own session") {
			t.Errorf("the revoke of the session's own token does not warn it signs out")
		}
		cc.post("/console/tokens/"+own.ID+"/revoke", nil).wantStatus(t, http.StatusSeeOther)
		cc.get("/console/tokens?done=revoked").wantSignIn(t)
		cc.get("/console").wantSignIn(t)
	})
}

// The trail: who issued and revoked which token, newest first, on the
// tokens page, on its own page and per token; an unknown token is 404.
func TestConsoleTokenEventsShowWhoIssuedWhat(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		cc, admin := consoleAs(t, a, "ops", auth.All)
		cc.get("/console/tokens")
		created := cc.post("/console/tokens", url.Values{"consumer": {"acme"}, "abilities[]": {auth.LicensesRead}}).wantStatus(t, http.StatusCreated)
		p, err := a.auth.Verify(context.Background(), html.UnescapeString(strings.TrimSpace(newTokenArea.FindStringSubmatch(created.Body)[1])))
		if err != nil {
			t.Fatal(err)
		}
		cc.post("/console/tokens/"+p.TokenID+"/revoke", nil).wantStatus(t, http.StatusSeeOther)

		for _, path := range []string{"/console/tokens", "/console/tokens/events", "/console/tokens/" + p.TokenID + "/events"} {
			body := cc.get(path).wantStatus(t, http.StatusOK).Body
			revoked := strings.Index(body, `status-revoked">revoked`)
			issued := strings.Index(body, `status-issued">issued`)
			if revoked < 0 || issued < 0 || revoked > issued {
				t.Errorf("%s: want revoked then issued, got at %d and %d", path, revoked, issued)
			}
			if !strings.Contains(body, "token <code>"+admin.ID+`</code> of <span class="clip" title="ops">ops</span>`) || !strings.Contains(body, "<code>"+p.TokenID+"</code>") {
				t.Errorf("%s does not say who did what", path)
			}
		}
		if body := cc.get("/console/tokens/events").Body; !strings.Contains(body, "command line") {
			t.Errorf("the trail does not show the command line's issue of the session's token")
		}
		cc.get("/console/tokens/01ARZ3NDEKTSV4RRFFQ69G5FAV/events").wantStatus(t, http.StatusNotFound)
	})
}

// An issue form sent twice (a reload of its answer, a double click) issues
// one token: the second send is a 409 that shows no token and issues none.
func TestConsoleIssueFormIssuesOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		cc, _ := consoleAs(t, a, "ops", auth.TokensManage)
		cc.get("/console/tokens").wantStatus(t, http.StatusOK)
		form := url.Values{"consumer": {"acme"}, "abilities[]": {auth.LicensesRead}, "once": {cc.once}}
		cc.post("/console/tokens", form).wantStatus(t, http.StatusCreated)
		again := cc.post("/console/tokens", form).wantStatus(t, http.StatusConflict)
		if newTokenArea.MatchString(again.Body) || !strings.Contains(again.Body, "This form was sent already") {
			t.Errorf("the form sent again: %s", again.Body)
		}
		toks, err := a.auth.List(context.Background(), "acme")
		if err != nil || len(toks) != 1 {
			t.Fatalf("acme's tokens = %d, %v; want the one the first send issued", len(toks), err)
		}
		// The page that answered has a fresh form of its own, which issues.
		cc.post("/console/tokens", url.Values{"consumer": {"acme"}, "abilities[]": {auth.LicensesRead}}).wantStatus(t, http.StatusCreated)
		// A form without its value is no console form.
		cc.post("/console/tokens", url.Values{"consumer": {"acme"}, "abilities[]": {auth.LicensesRead}, "once": {""}}).wantStatus(t, http.StatusConflict)
	})
}
