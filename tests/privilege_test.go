package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/tests/testdb"
)

// issueBody is a POST /api/tokens body for the consumer with the abilities.
func issueBody(t *testing.T, consumer string, abilities ...string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"consumer": consumer, "abilities": abilities})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// in is the app with its requests and assertions reporting to t, a sub-test.
func (a *app) in(t *testing.T) *app {
	sub := *a
	sub.t = t
	return &sub
}

// Least privilege for admins: a tokens:manage token issues consumer tokens
// (licenses:read, licenses:write) for any consumer and nothing more; only a
// * token grants the admin abilities (tokens:manage, intents:manage, *).
func TestWhoMayGrantWhat(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		granters := map[string][]string{
			"tokens:manage":                bearer(a.token("ops", auth.TokensManage)),
			"tokens:manage,intents:manage": bearer(a.token("ops", auth.TokensManage, auth.IntentsManage)),
			"*":                            bearer(a.token("root", auth.All)),
		}
		cases := []struct {
			granter string
			want    []string
			refused string // "" when the grant is allowed; else the abilities the 403 names
		}{
			// A tokens:manage token: consumer abilities for any consumer, no admin ability.
			{"tokens:manage", []string{auth.LicensesRead}, ""},
			{"tokens:manage", []string{auth.LicensesWrite}, ""},
			{"tokens:manage", []string{auth.LicensesRead, auth.LicensesWrite}, ""},
			{"tokens:manage", []string{auth.TokensManage}, "tokens:manage"},
			{"tokens:manage", []string{auth.IntentsManage}, "intents:manage"},
			{"tokens:manage", []string{auth.All}, "*"},
			{"tokens:manage", []string{auth.LicensesRead, auth.TokensManage}, "tokens:manage"},
			{"tokens:manage", []string{auth.LicensesWrite, auth.IntentsManage, auth.All}, "intents:manage, *"},
			// Holding an admin ability is not leave to grant it: only * grants them.
			{"tokens:manage,intents:manage", []string{auth.LicensesRead, auth.LicensesWrite}, ""},
			{"tokens:manage,intents:manage", []string{auth.IntentsManage}, "intents:manage"},
			{"tokens:manage,intents:manage", []string{auth.TokensManage}, "tokens:manage"},
			// A * token grants everything.
			{"*", []string{auth.LicensesRead}, ""},
			{"*", []string{auth.LicensesWrite}, ""},
			{"*", []string{auth.TokensManage}, ""},
			{"*", []string{auth.IntentsManage}, ""},
			{"*", []string{auth.All}, ""},
			{"*", []string{auth.LicensesRead, auth.LicensesWrite, auth.TokensManage, auth.IntentsManage, auth.All}, ""},
		}
		for i, tc := range cases {
			t.Run(fmt.Sprintf("%s grants %s", tc.granter, strings.Join(tc.want, "+")), func(t *testing.T) {
				a := a.in(t)
				consumer := fmt.Sprint("consumer-", i)
				before := a.tableRows("personal_access_tokens")
				r := a.do(http.MethodPost, "/api/tokens", issueBody(t, consumer, tc.want...), granters[tc.granter]...)
				if tc.refused != "" {
					m := r.wantError(http.StatusForbidden, "ability_not_grantable")
					if msg, _ := m["message"].(string); !strings.Contains(msg, "may not grant "+tc.refused+".") {
						t.Errorf("message = %q, want it to name %s", msg, tc.refused)
					}
					if after := a.tableRows("personal_access_tokens"); after != before {
						t.Errorf("a refused grant stored a token: %d rows, were %d", after, before)
					}
					return
				}
				r.wantStatus(http.StatusCreated)
				data := r.json()["data"].(map[string]any)
				if data["consumer"] != consumer || fmt.Sprint(data["abilities"]) != fmt.Sprint(tc.want) {
					t.Fatalf("issued = %v, want %s with %v", data, consumer, tc.want)
				}
				// The token issued works, with exactly what was granted.
				issued := bearer(data["token"].(string))
				wantLicenses, wantTokens := http.StatusForbidden, http.StatusForbidden
				if auth.Abilities(tc.want).Can(auth.LicensesRead) {
					wantLicenses = http.StatusNotFound // let in, and there is no such license
				}
				if auth.Abilities(tc.want).Can(auth.TokensManage) {
					wantTokens = http.StatusOK
				}
				a.do(http.MethodGet, "/api/licenses/01NOSUCHLICENSE00000000000", "", issued...).wantStatus(wantLicenses)
				a.do(http.MethodGet, "/api/tokens", "", issued...).wantStatus(wantTokens)
			})
		}
	})
}

// An unknown ability stays invalid input (422), for every granter; a known
// one the granter may not grant is refused (403) before the input is
// checked any further.
func TestUnknownAbilityIs422NotGrantableIs403(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		for _, granter := range [][]string{{auth.TokensManage}, {auth.All}} {
			admin := bearer(a.token("ops", granter...))
			m := a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", "licenses:delete"), admin...).wantError(http.StatusUnprocessableEntity, "")
			if errs, _ := m["errors"].(map[string]any); errs["abilities.0"] == nil { // Laravel keys an item's error by its index
				t.Errorf("%v granting licenses:delete: errors = %v, want abilities", granter, m["errors"])
			}
		}
		admin := bearer(a.token("ops", auth.TokensManage))
		a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", "licenses:delete", auth.All), admin...).
			wantError(http.StatusForbidden, "ability_not_grantable")
		a.do(http.MethodPost, "/api/tokens", issueBody(t, "", auth.TokensManage), admin...).
			wantError(http.StatusForbidden, "ability_not_grantable")
		// A consumer's token cannot reach the route at all.
		a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", auth.LicensesRead), a.consumer("acme")...).
			wantError(http.StatusForbidden, "missing_ability")
	})
}

// Least privilege for admins, the other way: a token may revoke a token
// only if it may grant every ability that token holds. A tokens:manage
// token revokes consumers' tokens; a token holding an admin ability is
// revoked only by a * token (or at the command line); a refusal is a 403
// that names the abilities, revokes nothing and records nothing.
func TestWhoMayRevokeWhat(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		revokers := map[string][]string{
			"tokens:manage":                {auth.TokensManage},
			"tokens:manage,intents:manage": {auth.TokensManage, auth.IntentsManage},
			"*":                            {auth.All},
		}
		cases := []struct {
			revoker string
			target  []string
			refused string // "" when the revoke is allowed; else the abilities the 403 names
		}{
			{"tokens:manage", []string{auth.LicensesRead}, ""},
			{"tokens:manage", []string{auth.LicensesRead, auth.LicensesWrite, auth.WebhooksManage}, ""},
			{"tokens:manage", []string{auth.TokensManage}, "tokens:manage"},
			{"tokens:manage", []string{auth.IntentsManage}, "intents:manage"},
			{"tokens:manage", []string{auth.All}, "*"},
			{"tokens:manage", []string{auth.LicensesRead, auth.IntentsManage, auth.All}, "intents:manage, *"},
			// Holding an admin ability is not leave to revoke its holders.
			{"tokens:manage,intents:manage", []string{auth.IntentsManage}, "intents:manage"},
			{"tokens:manage,intents:manage", []string{auth.LicensesWrite}, ""},
			{"*", []string{auth.LicensesRead}, ""},
			{"*", []string{auth.TokensManage}, ""},
			{"*", []string{auth.IntentsManage}, ""},
			{"*", []string{auth.All}, ""},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s revokes %s", tc.revoker, strings.Join(tc.target, "+")), func(t *testing.T) {
				a := a.in(t)
				revoker := a.issued("ops", revokers[tc.revoker]...)
				target := a.issued("target", tc.target...)
				r := a.do(http.MethodDelete, "/api/tokens/"+target.ID, "", bearer(revoker.Secret)...)
				if tc.refused == "" {
					r.wantStatus(http.StatusNoContent)
					if tokenRow(t, a, target.ID).RevokedAt == nil {
						t.Errorf("a 204 left the token alive")
					}
					return
				}
				m := r.wantError(http.StatusForbidden, "ability_not_grantable")
				if msg, _ := m["message"].(string); !strings.Contains(msg, "may not revoke a token holding "+tc.refused+".") {
					t.Errorf("message = %q, want it to name %s", msg, tc.refused)
				}
				if tokenRow(t, a, target.ID).RevokedAt != nil {
					t.Errorf("a refused revoke revoked the token")
				}
				if got := a.tokenEvents(bearer(revoker.Secret), "?token="+target.ID); len(got) != 1 {
					t.Errorf("events of the target = %v, want its issue alone", got)
				}
				if _, err := a.auth.Verify(t.Context(), target.Secret); err != nil {
					t.Errorf("the target no longer verifies: %v", err)
				}
			})
		}
	})
}

// A token may always revoke itself (it gives up its own abilities and
// takes none), and the operator at the command line revokes any token.
func TestAdminTokenRevokesItselfAndTheCLIRevokesAny(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		ops := a.issued("ops", auth.TokensManage, auth.IntentsManage)
		a.do(http.MethodDelete, "/api/tokens/"+ops.ID, "", bearer(ops.Secret)...).wantStatus(http.StatusNoContent)
		a.do(http.MethodGet, "/api/tokens", "", bearer(ops.Secret)...).wantStatus(http.StatusUnauthorized)

		root := a.issued("root", auth.All)
		a.runCLI("token", "revoke", root.ID)
		if tokenRow(t, a, root.ID).RevokedAt == nil {
			t.Errorf("licensor token revoke left a * token alive")
		}
	})
}
