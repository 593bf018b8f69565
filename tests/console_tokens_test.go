package tests

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// tokenRow is the token id's row in the token list.
func tokenRow(t *testing.T, a *app, id string) auth.Token {
	t.Helper()
	for _, tok := range mustList(t, a, "") {
		if tok.ID == id {
			return tok
		}
	}
	t.Fatalf("no token %s", id)
	return auth.Token{}
}

// The list shows each token with its consumer, abilities, issuer (its id
// and consumer, or the command line), and whether it is active (a Revoke
// button), revoked or expired; never a token string.
func TestConsoleTokensListsTokensWithIssuerAndState(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
		a := newApp(t, db, withClock(clk))
		ctx := context.Background()
		cc, root := consoleAs(t, a, "ops", auth.All)
		byRoot := audit.ByToken(root.ConsumerID, root.ID, "")
		shop, err := a.auth.Issue(ctx, byRoot, auth.IssueInput{Consumer: "shop", Name: "checkout", Abilities: []string{auth.LicensesRead, auth.LicensesWrite}})
		if err != nil {
			t.Fatal(err)
		}
		brief, err := a.auth.Issue(ctx, byRoot, auth.IssueInput{Consumer: "shop", Name: "brief", Abilities: []string{auth.LicensesRead}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		gone := a.issued("shop", auth.LicensesRead)
		if err := a.auth.Revoke(ctx, byRoot, gone.ID); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Hour)

		page := cc.get("/console/tokens").wantStatus(t, http.StatusOK)
		for _, secret := range []string{root.Secret, shop.Secret, brief.Secret, gone.Secret} {
			if strings.Contains(page.Body, secret) {
				t.Fatalf("the token list shows a token string")
			}
		}
		row := sectionRow(t, page.Body, "token-"+shop.ID)
		wantAll(t, "shop's row", row, "checkout", "shop", "licenses:read, licenses:write",
			"<code>"+root.ID+`</code><span class="clip" title="ops">ops</span>`, "Revoke", `action="/console/tokens/`+shop.ID+`/revoke"`, "data-confirm=")
		if row := sectionRow(t, page.Body, "token-"+root.ID); !strings.Contains(row, "command line") || !strings.Contains(row, "this session") {
			t.Errorf("the root token's row names no command line issuer, or not its session: %s", row)
		}
		if row := sectionRow(t, page.Body, "token-"+brief.ID); !strings.Contains(row, `status-expired">expired`) || strings.Contains(row, "Revoke") {
			t.Errorf("an expired token's row: %s", row)
		}
		if row := sectionRow(t, page.Body, "token-"+gone.ID); !strings.Contains(row, `status-revoked">revoked`) || strings.Contains(row, "Revoke") {
			t.Errorf("a revoked token's row: %s", row)
		}

		filtered := cc.get("/console/tokens?consumer=shop").wantStatus(t, http.StatusOK)
		if strings.Contains(filtered.Body, `id="token-`+root.ID+`"`) {
			t.Errorf("the filter by consumer shop lists ops' token")
		}
		if row := sectionRow(t, filtered.Body, "token-"+shop.ID); !strings.Contains(row, "<code>"+root.ID+`</code><span class="clip" title="ops">ops</span>`) {
			t.Errorf("filtered, the issuer's consumer is not named: %s", row)
		}
	})
}

// Only a token holding tokens:manage (or *) may see, issue or revoke
// tokens in the console, as in the API.
func TestConsoleTokensNeedTokensManage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		victim := a.issued("shop", auth.LicensesRead)
		cc, _ := consoleAs(t, a, "ops", auth.IntentsManage)
		page := cc.get("/console").wantStatus(t, http.StatusOK)
		if strings.Contains(page.Body, `href="/console/tokens"`) {
			t.Errorf("the navigation offers Tokens to a session without tokens:manage")
		}
		cc.get("/console/tokens").wantStatus(t, http.StatusForbidden)
		cc.get("/console/tokens/events").wantStatus(t, http.StatusForbidden)
		cc.get("/console/tokens/"+victim.ID+"/events").wantStatus(t, http.StatusForbidden)
		cc.post("/console/tokens", url.Values{"consumer": {"x"}, "abilities[]": {auth.LicensesRead}}).wantStatus(t, http.StatusForbidden)
		cc.post("/console/tokens/"+victim.ID+"/revoke", nil).wantStatus(t, http.StatusForbidden)
		if tokenRow(t, a, victim.ID).RevokedAt != nil {
			t.Errorf("a session without tokens:manage revoked a token")
		}
		if n := len(mustList(t, a, "x")); n != 0 {
			t.Errorf("a session without tokens:manage issued %d tokens", n)
		}
	})
}

func mustList(t *testing.T, a *app, consumer string) []auth.Token {
	t.Helper()
	toks, err := a.auth.List(context.Background(), consumer)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// tokenEventsOf are the audit events of the token id.
func tokenEventsOf(t *testing.T, a *app, id string) []auth.TokenEvent {
	t.Helper()
	evs, _, err := a.auth.Events(context.Background(), auth.TokenEventFilter{TokenID: id})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// The console keeps the API's rule for revoking: a tokens:manage session
// is offered no Revoke button for a token holding an admin ability, and a
// revoke sent anyway is a 403 that revokes nothing; a * session may.
func TestConsoleRevokesOnlyWhatTheSessionMayGrant(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := a.issued("root", auth.All)
		shop := a.issued("shop", auth.LicensesRead, auth.WebhooksManage)
		cc, own := consoleAs(t, a, "ops", auth.TokensManage)

		page := cc.get("/console/tokens").wantStatus(t, http.StatusOK)
		for id, offered := range map[string]bool{shop.ID: true, own.ID: true, root.ID: false} {
			row := sectionRow(t, page.Body, "token-"+id)
			if got := strings.Contains(row, `/revoke"`); got != offered {
				t.Errorf("token %s: Revoke offered %v, want %v: %s", id, got, offered, row)
			}
			if !offered && !strings.Contains(row, "revoked by a * token or at the command line") {
				t.Errorf("the row of a token the session may not revoke does not say who may: %s", row)
			}
		}
		cc.post("/console/tokens/"+root.ID+"/revoke", nil).wantStatus(t, http.StatusForbidden, "may not revoke a token holding *")
		if tokenRow(t, a, root.ID).RevokedAt != nil {
			t.Errorf("a tokens:manage session revoked a * token")
		}
		cc.post("/console/tokens/"+shop.ID+"/revoke", nil).wantStatus(t, http.StatusSeeOther)

		rc, _ := consoleAs(t, a, "root", auth.All)
		if row := sectionRow(t, rc.get("/console/tokens").wantStatus(t, http.StatusOK).Body, "token-"+own.ID); !strings.Contains(row, `/revoke"`) {
			t.Errorf("a * session is offered no Revoke for a tokens:manage token: %s", row)
		}
		rc.post("/console/tokens/"+own.ID+"/revoke", nil).wantStatus(t, http.StatusSeeOther)
		if tokenRow(t, a, own.ID).RevokedAt == nil {
			t.Errorf("a * session could not revoke a tokens:manage token")
		}
	})
}
