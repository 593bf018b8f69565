package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// pendingOperation asserts a 202 operation_pending that names its intent,
// with the Location to ask at, and returns the intent's id.
func (r *response) pendingOperation() string {
	r.t.Helper()
	body := r.wantError(http.StatusAccepted, "operation_pending")
	op, ok := body["operation"].(map[string]any)
	if !ok {
		r.t.Fatalf("202 without an operation: %s", r.Body.String())
	}
	id, _ := op["id"].(string)
	if len(id) != 26 || op["status"] != idempotency.StatusPending || op["retry_after"] != float64(5) {
		r.t.Fatalf("operation = %v, want a ULID, pending, retry_after 5", op)
	}
	if got := r.Header().Get("Location"); got != "/api/operations/"+id {
		r.t.Errorf("Location = %q, want /api/operations/%s", got, id)
	}
	if r.Header().Get("Retry-After") != "5" {
		r.t.Errorf("Retry-After = %q, want 5", r.Header().Get("Retry-After"))
	}
	return id
}

// Every 202 names an operation that GET /api/operations/{id} explains, for
// a client that sent a key and for one that did not; only to its consumer.
func TestEveryPendingAnswerNamesAnOperation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme, globex := a.consumer("acme"), a.consumer("globex")
		lost := reply{status: 502, body: `upstream reset`, commit: true}
		a.vendor.script("POST", lost, lost)
		ids := map[string]string{
			"keyed":   a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-3001")...).pendingOperation(),
			"keyless": a.do(http.MethodPost, "/api/licenses", `{"name":"B","domain":"b.test"}`, acme...).pendingOperation(),
		}
		if strings.Contains(ids["keyed"], "order-3001") {
			t.Error("the operation id carries the raw key")
		}
		// A retry of the keyed intent names the same operation.
		if again := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-3001")...).pendingOperation(); again != ids["keyed"] {
			t.Errorf("the retry named operation %s, want %s", again, ids["keyed"])
		}
		for name, id := range ids {
			got := a.do(http.MethodGet, "/api/operations/"+id, "", acme...).wantStatus(http.StatusOK).json()["data"].(map[string]any)
			if got["id"] != id || got["operation"] != "licenses.store" || got["status"] != idempotency.StatusPending || got["result"] != nil {
				t.Errorf("%s: pending operation = %v", name, got)
			}
			a.do(http.MethodGet, "/api/operations/"+id, "", globex...).wantStatus(http.StatusNotFound)
		}
		a.do(http.MethodGet, "/api/operations/01NOSUCHOPERATION000000000", "", acme...).wantStatus(http.StatusNotFound)
		writeOnly := bearer(a.token("acme", auth.LicensesWrite))
		a.do(http.MethodGet, "/api/operations/"+ids["keyed"], "", writeOnly...).wantError(http.StatusForbidden, "missing_ability")

		a.reconcileOnce(a.reconciler())
		for name, id := range ids {
			got := a.do(http.MethodGet, "/api/operations/"+id, "", acme...).wantStatus(http.StatusOK).json()["data"].(map[string]any)
			result, _ := got["result"].(map[string]any)
			loc, _ := result["location"].(string)
			if got["status"] != idempotency.StatusCompleted || result["status"] != float64(http.StatusCreated) || !strings.HasPrefix(loc, "/api/licenses/") {
				t.Fatalf("%s: completed operation = %v", name, got)
			}
			a.do(http.MethodGet, loc, "", acme...).wantStatus(http.StatusOK)
		}
	})
}

// failIntent drives a keyed create to failed: the vendor stays down through
// every attempt the app allows (the test's RECONCILE_MAX_ATTEMPTS is 1).
func (a *app) failIntent(token []string, key, body string, clk *testkit.Clock) string {
	a.t.Helper()
	a.vendor.script("POST", reply{status: 500, body: `{}`})
	id := a.do(http.MethodPost, "/api/licenses", body, keyed(token, key)...).pendingOperation()
	a.vendor.script("GET", reply{status: 503, body: `{}`})
	if got := results(a.reconcileOnce(a.reconciler())); got != "failed" {
		a.t.Fatalf("reconcile results = %q, want failed", got)
	}
	return id
}

// A failed intent stays visible and counted, and heals by itself on the
// slow schedule once the vendor is back: nobody touches SQL.
func TestFailedIntentHealsOnTheSlowSchedule(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) {
			c.Reconcile.MaxAttempts, c.Reconcile.FailedEvery = 1, time.Hour
		}))
		acme := a.consumer("acme")
		id := a.failIntent(acme, "order-3002", acmeBody, clk)
		if got := a.metric("licensor_idempotency_failed"); got != "licensor_idempotency_failed 1" {
			t.Errorf("gauge: %q, want 1", got)
		}
		clk.Advance(59 * time.Minute)
		if got := results(a.reconcileOnce(a.reconciler())); got != "" {
			t.Fatalf("a failed intent was tried before RECONCILE_FAILED_INTERVAL: %q", got)
		}
		_, _, _ = a.app.Pruner.RunOnce(context.Background()) // a failed intent is never pruned, expired or not
		clk.Advance(2 * time.Minute)
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("the slow retry: results %q, want completed", got)
		}
		op := a.do(http.MethodGet, "/api/operations/"+id, "", acme...).json()["data"].(map[string]any)
		if op["status"] != idempotency.StatusCompleted {
			t.Errorf("operation = %v, want completed", op)
		}
		if got := a.metric("licensor_idempotency_failed"); got != "licensor_idempotency_failed 0" {
			t.Errorf("gauge after healing: %q, want 0", got)
		}
		if a.vendor.siteCount() != 1 || a.licenseRows() != 1 {
			t.Errorf("%d sites, %d licenses; want 1 and 1", a.vendor.siteCount(), a.licenseRows())
		}
	})
}

// The operator's view: list, filter, show and retry intents under
// intents:manage, never seeing a raw key, a token or a stored body.
func TestIntentsAdminRoutes(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		acme, globex := a.consumer("acme"), a.consumer("globex")
		failed := a.failIntent(acme, "secret-key-3003", acmeBody, clk)
		a.vendor.script("POST", reply{status: 500, body: `{}`, commit: true})
		pending := a.do(http.MethodPost, "/api/licenses", `{"name":"G","domain":"g.test"}`, keyed(globex, "secret-key-3004")...).pendingOperation()
		a.create(globex, "done.test")
		admin := bearer(a.token("ops", auth.IntentsManage))

		list := func(query string) []any {
			t.Helper()
			r := a.do(http.MethodGet, "/api/intents"+query, "", admin...).wantStatus(http.StatusOK)
			for _, secret := range []string{"secret-key-3003", "secret-key-3004", "LK-", "Bearer", admin[1][7:]} {
				if strings.Contains(r.Body.String(), secret) {
					t.Errorf("GET /api/intents%s shows %q: %s", query, secret, r.Body.String())
				}
			}
			return r.json()["data"].([]any)
		}
		if got := list(""); len(got) != 3 {
			t.Errorf("all intents: %d, want 3", len(got))
		}
		byStatus := list("?status=failed")
		if len(byStatus) != 1 || byStatus[0].(map[string]any)["id"] != failed {
			t.Errorf("failed intents: %v", byStatus)
		}
		one := byStatus[0].(map[string]any)
		if one["consumer"] != "acme" || one["key_source"] != "client" || one["key_digest"] == "" || one["next_attempt_at"] == nil {
			t.Errorf("failed intent = %v", one)
		}
		if got := list("?consumer=globex"); len(got) != 2 {
			t.Errorf("globex's intents: %d, want 2", len(got))
		}
		if got := list("?consumer=nobody"); len(got) != 0 {
			t.Errorf("an unknown consumer lists %d intents, want none", len(got))
		}
		a.do(http.MethodGet, "/api/intents?status=lost", "", admin...).wantStatus(http.StatusUnprocessableEntity)

		shown := a.do(http.MethodGet, "/api/intents/"+pending, "", admin...).wantStatus(http.StatusOK).json()["data"].(map[string]any)
		if shown["status"] != idempotency.StatusPending || shown["consumer"] != "globex" || shown["external_ref"] != "g.test" {
			t.Errorf("shown = %v", shown)
		}
		a.do(http.MethodGet, "/api/intents/01NOSUCHINTENT000000000000", "", admin...).wantStatus(http.StatusNotFound)

		a.do(http.MethodPost, "/api/intents/"+pending+"/retry", "", admin...).wantError(http.StatusConflict, "intent_not_failed")
		retried := a.do(http.MethodPost, "/api/intents/"+failed+"/retry", "", admin...).wantStatus(http.StatusOK).json()["data"].(map[string]any)
		if retried["status"] != idempotency.StatusPending || retried["attempts"] != float64(0) {
			t.Errorf("retried = %v, want pending with 0 attempts", retried)
		}
		if got := results(a.reconcileOnce(a.reconciler())); !strings.Contains(got, "completed") {
			t.Errorf("after the retry the reconciler did %q", got)
		}

		// Abilities: a consumer's token may not see intents; "*" may.
		a.do(http.MethodGet, "/api/intents", "", acme...).wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodPost, "/api/intents/"+failed+"/retry", "", acme...).wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodGet, "/api/intents", "", bearer(a.token("root", auth.All))...).wantStatus(http.StatusOK)
	})
}

// Who created or revoked a customer's license, and when, is answerable
// without logs: the audit trail, on the license's owner's token only.
func TestLicenseEventsTellWhoDidWhat(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		tok, err := a.auth.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: "acme", Abilities: []string{auth.LicensesRead, auth.LicensesWrite}})
		if err != nil {
			t.Fatal(err)
		}
		acme := bearer(tok.Secret)
		id := a.do(http.MethodPost, "/api/licenses", acmeBody, append(acme, "X-Request-Id", "req-create")...).
			wantStatus(http.StatusCreated).licenseData()["id"].(string)
		busy := reply{status: 429, body: `{}`, header: map[string]string{"Retry-After": "1"}}
		a.vendor.script("DELETE", busy, busy, busy, busy)
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantError(http.StatusServiceUnavailable, "vendor_unavailable")
		a.do(http.MethodDelete, "/api/licenses/"+id, "", append(acme, "X-Request-Id", "req-revoke")...).wantStatus(http.StatusNoContent)

		a.vendor.addSite("Old", "old.test") // an earlier attempt made it
		adopted := a.create(acme, "old.test")

		events := func(license string) []string {
			t.Helper()
			var out []string
			for _, e := range a.do(http.MethodGet, "/api/licenses/"+license+"/events", "", acme...).wantStatus(http.StatusOK).json()["data"].([]any) {
				m := e.(map[string]any)
				if m["token_id"] != tok.ID || m["actor"] != "request" {
					t.Errorf("event %v: want actor request and token %s", m, tok.ID)
				}
				out = append(out, m["event"].(string)+"@"+m["request_id"].(string)[:min(11, len(m["request_id"].(string)))])
			}
			return out
		}
		got := events(id)
		if len(got) != 3 || got[0] != "created@req-create" || !strings.HasPrefix(got[1], "failed@") || got[2] != "revoked@req-revoke" {
			t.Errorf("events = %v, want created, failed, revoked", got)
		}
		if got := events(adopted); len(got) != 1 || !strings.HasPrefix(got[0], "adopted@") {
			t.Errorf("events of the adopted license = %v", got)
		}
		a.do(http.MethodGet, "/api/licenses/"+id+"/events", "", a.consumer("globex")...).wantStatus(http.StatusNotFound)
	})
}

// A license the reconciler records names it, on behalf of the token that
// asked.
func TestReconciledLicenseEventNamesTheReconciler(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		tok, err := a.auth.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: "acme", Abilities: []string{auth.LicensesRead, auth.LicensesWrite}})
		if err != nil {
			t.Fatal(err)
		}
		acme := bearer(tok.Secret)
		a.vendor.script("POST", reply{status: 502, body: `{}`, commit: true})
		a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-3005")...).pendingOperation()
		a.reconcileOnce(a.reconciler())
		id := *a.record("order-3005").ResourceID
		data := a.do(http.MethodGet, "/api/licenses/"+id+"/events", "", acme...).wantStatus(http.StatusOK).json()["data"].([]any)
		if len(data) != 1 {
			t.Fatalf("events = %v", data)
		}
		e := data[0].(map[string]any)
		if e["event"] != "reconciled" || e["actor"] != "reconciler" || e["request_id"] != nil || e["token_id"] != tok.ID {
			t.Errorf("event = %v, want reconciled by the reconciler for token %s", e, tok.ID)
		}
	})
}
