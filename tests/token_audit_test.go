package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/tests/testdb"
)

// issued issues a token at the command line's level (no issuer) and returns
// its row and secret.
func (a *app) issued(consumer string, abilities ...string) auth.Issued {
	a.t.Helper()
	tok, err := a.auth.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: consumer, Abilities: abilities})
	if err != nil {
		a.t.Fatalf("issue token: %v", err)
	}
	return tok
}

// tokenEvents is GET /api/tokens/events with query, as admin: its data.
func (a *app) tokenEvents(admin []string, query string) []map[string]any {
	a.t.Helper()
	body := a.do(http.MethodGet, "/api/tokens/events"+query, "", admin...).wantStatus(http.StatusOK).json()
	var out []map[string]any
	for _, e := range body["data"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// listedToken is the token id's object in GET /api/tokens.
func (a *app) listedToken(admin []string, id string) map[string]any {
	a.t.Helper()
	for _, v := range a.do(http.MethodGet, "/api/tokens", "", admin...).wantStatus(http.StatusOK).json()["data"].([]any) {
		if m := v.(map[string]any); m["id"] == id {
			return m
		}
	}
	a.t.Fatalf("token %s is not listed", id)
	return nil
}

// A token keeps the token that issued it: shown as issued_by when it is
// issued and in the list, null for one issued at the command line, and in
// `licensor token list`'s ISSUED BY column.
func TestTokenIssuerIsStoredAndShown(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := a.issued("root", auth.All)
		admin := bearer(root.Secret)
		data := a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", auth.LicensesRead), admin...).wantStatus(http.StatusCreated).json()["data"].(map[string]any)
		if data["issued_by"] != root.ID {
			t.Errorf("issued token: issued_by = %v, want the issuing token %s", data["issued_by"], root.ID)
		}
		id := data["id"].(string)
		if got := a.listedToken(admin, id)["issued_by"]; got != root.ID {
			t.Errorf("listed token: issued_by = %v, want %s", got, root.ID)
		}
		if got, ok := a.listedToken(admin, root.ID)["issued_by"]; !ok || got != nil {
			t.Errorf("a token issued at the command line: issued_by = %v (present %v), want null", got, ok)
		}
		lines := strings.Split(string(a.runCLI("token", "list")), "\n")
		if !strings.Contains(lines[0], "ISSUED BY") {
			t.Errorf("token list's header has no ISSUED BY: %q", lines[0])
		}
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, id+" ") && !strings.Contains(l, " "+root.ID+" ") {
				t.Errorf("token list does not name %s's issuer %s: %q", id, root.ID, l)
			}
		}
	})
}

// `licensor token list --json` prints, for every token, the very object
// GET /api/tokens answers (nulls and times included): one issued by a
// token, one at the command line, one used, one revoked.
func TestTokenListCLIJSONIsTheAPIs(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		admin := bearer(a.issued("root", auth.All).Secret)
		id := a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", auth.LicensesRead), admin...).wantStatus(http.StatusCreated).json()["data"].(map[string]any)["id"].(string)
		a.do(http.MethodDelete, "/api/tokens/"+a.issued("gone", auth.LicensesRead).ID, "", admin...).wantStatus(http.StatusNoContent)
		if err := a.auth.Flush(context.Background()); err != nil { // root's use: written now, and not again within the minute
			t.Fatal(err)
		}
		api := a.do(http.MethodGet, "/api/tokens", "", admin...).wantStatus(http.StatusOK).json()["data"].([]any)
		var cli []map[string]any
		if out := a.runCLI("token", "list", "--json"); json.Unmarshal(out, &cli) != nil {
			t.Fatalf("token list --json is not a JSON array of objects:\n%s", out)
		}
		if len(api) != 3 || len(cli) != len(api) {
			t.Fatalf("the API lists %d tokens, the CLI %d; want 3 each", len(api), len(cli))
		}
		for i, v := range api {
			sameObject(t, fmt.Sprintf("token %d", i), v.(map[string]any), cli[i])
		}
		if a.listedToken(admin, id)["issued_by"] == nil {
			t.Error("the token issued by a token names no issuer")
		}
	})
}

// An admin lists who issued and revoked which token, newest first, paged:
// the actor is the token that asked (with its consumer and the request
// id), a revoke of a token revoked already is no second event, and the
// list narrows to one token.
func TestTokenEventsNameWhoIssuedAndRevoked(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		ops := a.issued("ops", auth.TokensManage)
		admin := bearer(ops.Secret)
		issued := a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", auth.LicensesRead), append(admin, "X-Request-Id", "req-issue")...).
			wantStatus(http.StatusCreated).json()["data"].(map[string]any)
		id := issued["id"].(string)
		a.do(http.MethodDelete, "/api/tokens/"+id, "", append(admin, "X-Request-Id", "req-revoke")...).wantStatus(http.StatusNoContent)
		a.do(http.MethodDelete, "/api/tokens/"+id, "", append(admin, "X-Request-Id", "req-again")...).wantStatus(http.StatusNoContent) // nothing changes

		all := a.tokenEvents(admin, "")
		if len(all) != 3 {
			t.Fatalf("events = %v, want 3: ops issued (console), acme's issued and revoked", all)
		}
		wantEvent := func(e map[string]any, event, token, consumer, actor string, actorToken, actorConsumer, requestID any) {
			t.Helper()
			want := map[string]any{"event": event, "token_id": token, "consumer": consumer, "actor": actor,
				"actor_token_id": actorToken, "actor_consumer": actorConsumer, "request_id": requestID}
			for k, v := range want {
				if e[k] != v {
					t.Errorf("event %v: %s = %#v, want %#v", e, k, e[k], v)
				}
			}
		}
		wantEvent(all[0], audit.TokenRevoked, id, "acme", audit.ActorToken, ops.ID, "ops", "req-revoke")
		wantEvent(all[1], audit.TokenIssued, id, "acme", audit.ActorToken, ops.ID, "ops", "req-issue")
		wantEvent(all[2], audit.TokenIssued, ops.ID, "ops", audit.ActorConsole, nil, nil, nil)
		if !(all[0]["id"].(float64) > all[1]["id"].(float64) && all[1]["id"].(float64) > all[2]["id"].(float64)) {
			t.Errorf("events are not newest first: %v", all)
		}

		if got := a.tokenEvents(admin, "?token="+id); len(got) != 2 || got[0]["event"] != audit.TokenRevoked || got[1]["event"] != audit.TokenIssued {
			t.Errorf("?token=%s: %v, want its revoke then its issue", id, got)
		}
		if got := a.tokenEvents(admin, "?token=01NOSUCHTOKEN0000000000000"); len(got) != 0 {
			t.Errorf("an unknown token lists %v, want nothing", got)
		}
		page := a.do(http.MethodGet, "/api/tokens/events?per_page=2&page=2", "", admin...).wantStatus(http.StatusOK).json()
		meta := page["meta"].(map[string]any)
		if data := page["data"].([]any); len(data) != 1 || data[0].(map[string]any)["token_id"] != ops.ID ||
			meta["current_page"] != float64(2) || meta["per_page"] != float64(2) || meta["total"] != float64(3) || meta["last_page"] != float64(2) {
			t.Errorf("page 2 of 2 = %v", page)
		}
		for _, q := range []string{"?per_page=0", "?per_page=101", "?per_page=x"} {
			a.do(http.MethodGet, "/api/tokens/events"+q, "", admin...).wantStatus(http.StatusUnprocessableEntity)
		}
		// tokens:manage only: a consumer's token, or an intents:manage one, may not read it.
		a.do(http.MethodGet, "/api/tokens/events", "", a.consumer("acme")...).wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodGet, "/api/tokens/events", "", bearer(a.token("ops", auth.IntentsManage))...).wantError(http.StatusForbidden, "missing_ability")
		// The static route does not shadow DELETE /api/tokens/{id}, and no token is named "events".
		if code := a.do(http.MethodDelete, "/api/tokens/events", "", admin...).Code; code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("DELETE /api/tokens/events = %d, want 404 or 405", code)
		}
	})
}

// The red team's finding: a tokens:manage token could revoke a * token.
// It no longer may (TestWhoMayRevokeWhat); the revoke of a * token by
// another leaves an event naming the revoker, its consumer and the
// request, in the same transaction as the revoke.
func TestRevokingAStarTokenLeavesATrace(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := a.issued("root", auth.All)
		ops := a.issued("ops", auth.TokensManage)
		a.do(http.MethodDelete, "/api/tokens/"+root.ID, "", append(bearer(ops.Secret), "X-Request-Id", "req-rogue")...).
			wantError(http.StatusForbidden, "ability_not_grantable")
		other := a.issued("other-root", auth.All)
		a.do(http.MethodDelete, "/api/tokens/"+root.ID, "", append(bearer(other.Secret), "X-Request-Id", "req-root")...).wantStatus(http.StatusNoContent)
		a.do(http.MethodGet, "/api/tokens", "", bearer(root.Secret)...).wantStatus(http.StatusUnauthorized)
		got := a.tokenEvents(bearer(ops.Secret), "?token="+root.ID)
		if len(got) != 2 {
			t.Fatalf("events of the * token = %v, want its issue and its revoke", got)
		}
		e := got[0]
		if e["event"] != audit.TokenRevoked || e["token_id"] != root.ID || e["consumer"] != "root" || e["actor"] != audit.ActorToken ||
			e["actor_token_id"] != other.ID || e["actor_consumer"] != "other-root" || e["request_id"] != "req-root" {
			t.Errorf("the revoke of the * token: %v, want it to name %s of other-root, in req-root", e, other.ID)
		}
	})
}

// The actor is the server's: an X-Request-Id that reads like an actor
// (console, a token id) is kept as the request id only, and the event's
// actor is the token that authenticated.
func TestSpoofedRequestIDNeverBecomesTheActor(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := a.issued("root", auth.All)
		other := a.issued("other", auth.TokensManage)
		for _, spoof := range []string{audit.ActorConsole, other.ID} {
			data := a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", auth.LicensesRead), append(bearer(root.Secret), "X-Request-Id", spoof)...).
				wantStatus(http.StatusCreated).json()["data"].(map[string]any)
			a.do(http.MethodDelete, "/api/tokens/"+data["id"].(string), "", append(bearer(root.Secret), "X-Request-Id", spoof)...).wantStatus(http.StatusNoContent)
			events := a.tokenEvents(bearer(root.Secret), "?token="+data["id"].(string))
			if len(events) != 2 {
				t.Fatalf("events = %v", events)
			}
			for _, e := range events {
				if e["actor"] != audit.ActorToken || e["actor_token_id"] != root.ID || e["actor_consumer"] != "root" || e["request_id"] != spoof {
					t.Errorf("X-Request-Id %q: event %v, want actor token %s with request_id %q", spoof, e, root.ID, spoof)
				}
			}
		}
	})
}

// The command line's issue and revoke are events of the actor console,
// with no token, consumer or request; `licensor token events --json`
// prints the API's objects.
func TestTokenCLIWritesConsoleEvents(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.runCLI("token", "issue", "--consumer", "acme", "--abilities", auth.LicensesRead)
		admin := bearer(a.issued("ops", auth.TokensManage).Secret)
		var acme string
		for _, v := range a.do(http.MethodGet, "/api/tokens?consumer=acme", "", admin...).wantStatus(http.StatusOK).json()["data"].([]any) {
			acme = v.(map[string]any)["id"].(string)
		}
		a.runCLI("token", "revoke", acme)
		api := a.tokenEvents(admin, "?token="+acme)
		if len(api) != 2 {
			t.Fatalf("events = %v, want the CLI's issue and revoke", api)
		}
		for i, event := range []string{audit.TokenRevoked, audit.TokenIssued} {
			e := api[i]
			if e["event"] != event || e["actor"] != audit.ActorConsole || e["actor_token_id"] != nil || e["actor_consumer"] != nil || e["request_id"] != nil {
				t.Errorf("event %d = %v, want %s by the console, with no token, consumer or request", i, e, event)
			}
		}
		var cli []map[string]any
		if out := a.runCLI("token", "events", "--token", acme, "--json"); json.Unmarshal(out, &cli) != nil || len(cli) != len(api) {
			t.Fatalf("token events --json:\n%s", out)
		}
		for i := range api {
			sameObject(t, fmt.Sprint("event ", i), api[i], cli[i])
		}
		if out := string(a.runCLI("token", "events")); !strings.Contains(out, "ACTOR CONSUMER") || strings.Count(out, audit.TokenIssued) != 2 {
			t.Errorf("token events prints:\n%s", out)
		}
	})
}

// An issue or a revoke and its audit event commit together: when the
// event cannot be written, no token is issued and none is revoked.
func TestTokenChangeAndItsEventAreOneTransaction(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := a.issued("root", auth.All)
		victim := a.issued("acme", auth.LicensesRead)
		fault := testdb.Inject(t, db.Gorm, "create", audit.Event{}.TableName(), nil, errors.New("injected"))
		before := a.tokenRows()
		fault.Arm(1)
		a.do(http.MethodPost, "/api/tokens", issueBody(t, "acme", auth.LicensesRead), bearer(root.Secret)...).wantStatus(http.StatusInternalServerError)
		if after := a.tokenRows(); after != before || fault.Hits() != 1 {
			t.Errorf("%d tokens after an issue whose event failed (%d hits), were %d", after, fault.Hits(), before)
		}
		fault.Arm(1)
		a.do(http.MethodDelete, "/api/tokens/"+victim.ID, "", bearer(root.Secret)...).wantStatus(http.StatusInternalServerError)
		a.do(http.MethodGet, "/api/licenses", "", bearer(victim.Secret)...).wantStatus(http.StatusOK) // still live
		if got := a.tokenEvents(bearer(root.Secret), "?token="+victim.ID); len(got) != 1 {
			t.Errorf("events of the token = %v, want its issue alone", got)
		}
		a.do(http.MethodDelete, "/api/tokens/"+victim.ID, "", bearer(root.Secret)...).wantStatus(http.StatusNoContent)
		a.do(http.MethodGet, "/api/licenses", "", bearer(victim.Secret)...).wantStatus(http.StatusUnauthorized)
	})
}

// The access line of a request refused after its token was verified (403
// missing_ability, 429 rate_limited) names the token and its consumer too.
func TestAccessLogNamesTheTokenOfARefusedRequest(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"), rateLimited(1))
	tok := a.issued("acme", auth.LicensesRead)
	a.do(http.MethodGet, "/api/tokens", "", bearer(tok.Secret)...).wantError(http.StatusForbidden, "missing_ability")
	a.do(http.MethodGet, "/api/licenses", "", bearer(tok.Secret)...).wantError(http.StatusTooManyRequests, "rate_limited")
	var lines []map[string]any
	for _, l := range strings.Split(a.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d access lines, want 2:\n%s", len(lines), a.logs.String())
	}
	for _, l := range lines {
		if l["token_id"] != tok.ID || l["consumer_id"] != tok.ConsumerID {
			t.Errorf("access line %v: want token_id %s and consumer_id %s", l, tok.ID, tok.ConsumerID)
		}
	}
	if strings.Contains(a.logs.String(), tok.Secret) {
		t.Error("the token reached the log")
	}
}
