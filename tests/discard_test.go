package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// discard is POST /api/intents/{id}/discard with body, as token.
func (a *app) discard(token []string, id, body string) *response {
	a.t.Helper()
	return a.do(http.MethodPost, "/api/intents/"+id+"/discard", body, token...)
}

// intentEvents is GET /api/intents/{id}/events's data, as token.
func (a *app) intentEvents(token []string, id string) []map[string]any {
	a.t.Helper()
	var out []map[string]any
	for _, e := range a.do(http.MethodGet, "/api/intents/"+id+"/events", "", token...).wantStatus(http.StatusOK).json()["data"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// shownIntent is GET /api/intents/{id}'s data, as token.
func (a *app) shownIntent(token []string, id string) map[string]any {
	a.t.Helper()
	return a.do(http.MethodGet, "/api/intents/"+id, "", token...).wantStatus(http.StatusOK).json()["data"].(map[string]any)
}

// runCLIErr runs `licensor args…` as runCLI does, and returns its error
// rather than failing the test.
func (a *app) runCLIErr(args ...string) error {
	a.t.Helper()
	vars := map[string]string{"APP_ENV": config.EnvTesting, "APP_KEY": config.EncodeKey(testKey)}
	if a.db.Dialect == database.MySQL {
		vars["DB_CONNECTION"], vars["DB_URL"] = "mysql", a.db.Config.URL
	} else {
		vars["DB_DATABASE"] = a.db.Config.Database
	}
	return console.Run(context.Background(), args, func(k string) string { return vars[k] }, &bytes.Buffer{}, &bytes.Buffer{})
}

const discardReason = `{"reason":"  the customer cancelled order 4001  "}`

// A failed intent discarded by an operator is settled for good: discarded,
// its event (reason, token, request id) in its trail, out of the failed
// gauge; a client's retry with its key is 409 intent_discarded without
// reaching the vendor (the reason not told), the reconciler's passes leave
// it alone, and once the key expires it runs as a new intent.
func TestDiscardSettlesAFailedIntentForGood(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		acme := a.consumer("acme")
		id := a.failIntent(acme, "order-4001", acmeBody, clk)
		ops := a.issued("ops", auth.IntentsManage)
		admin := bearer(ops.Secret)

		got := a.discard(append(admin, "X-Request-Id", "req-discard"), id, discardReason).wantStatus(http.StatusOK).json()["data"].(map[string]any)
		if got["id"] != id || got["status"] != idempotency.StatusDiscarded || got["next_attempt_at"] != nil || got["consumer"] != "acme" {
			t.Errorf("discarded intent = %v", got)
		}
		events := a.intentEvents(admin, id)
		if len(events) != 2 || events[0]["event"] != audit.IntentAttempted || events[0]["actor"] != audit.ActorReconciler {
			t.Fatalf("events = %v, want the reconciler's failed attempt, then the discard", events)
		}
		want := map[string]any{"event": audit.IntentDiscarded, "intent_id": id, "consumer": "acme", "actor": audit.ActorToken,
			"actor_token_id": ops.ID, "actor_consumer": "ops", "request_id": "req-discard", "reason": "the customer cancelled order 4001"}
		for k, v := range want {
			if events[1][k] != v {
				t.Errorf("event %s = %#v, want %#v", k, events[1][k], v)
			}
		}
		if list := a.do(http.MethodGet, "/api/intents?status=discarded", "", admin...).wantStatus(http.StatusOK).json()["data"].([]any); len(list) != 1 {
			t.Errorf("?status=discarded lists %d intents, want 1", len(list))
		}
		if got := a.metric("licensor_idempotency_failed"); got != "licensor_idempotency_failed 0" {
			t.Errorf("failed gauge after the discard: %q", got)
		}
		if strings.Contains(a.logs.String(), "cancelled order") {
			t.Error("the reason reached the log")
		}

		// The client's retry: refused, nothing executed, nothing told of the reason.
		calls := a.vendor.count("")
		m := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-4001")...).wantError(http.StatusConflict, "intent_discarded")
		if msg := m["message"].(string); strings.Contains(msg, "cancelled") || !strings.Contains(msg, "new Idempotency-Key") {
			t.Errorf("message = %q", msg)
		}
		a.wantVendorCalls("", calls)
		if rec := a.record("order-4001"); rec.Status != idempotency.StatusDiscarded || ptr.Deref(rec.PublicID) != id {
			t.Errorf("after the retry the record is %s %s, want discarded %s", rec.Status, ptr.Deref(rec.PublicID), id)
		}
		if got := a.metric(`licensor_idempotency_requests_total{operation="licenses.store",outcome="discarded"}`); !strings.HasSuffix(got, " 1") {
			t.Errorf("discarded outcome: %q, want 1", got)
		}
		// The same key with another request is the key's reuse, as for any intent.
		a.do(http.MethodPost, "/api/licenses", `{"name":"Other","domain":"other.test"}`, keyed(acme, "order-4001")...).
			wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")

		// Past its slow retry's time the reconciler still leaves it alone; a
		// second discard finds nothing to discard.
		clk.Advance(61 * time.Minute)
		if got := results(a.reconcileOnce(a.reconciler())); got != "" {
			t.Errorf("the reconciler worked a discarded intent: %q", got)
		}
		a.wantVendorCalls("", calls)
		if rec := a.record("order-4001"); rec.Status != idempotency.StatusDiscarded {
			t.Errorf("after a pass the record is %s", rec.Status)
		}
		a.discard(admin, id, discardReason).wantError(http.StatusConflict, "intent_not_discardable")
		if n := len(a.intentEvents(admin, id)); n != 2 {
			t.Errorf("%d events after a refused discard, want 2 (the failed attempt, the discard)", n)
		}

		// Expired: the key is a new intent, executed for real, under a new id.
		loc := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-4001")...).wantStatus(http.StatusCreated).Header().Get("Location")
		rec := a.record("order-4001")
		if rec.Status != idempotency.StatusCompleted || ptr.Deref(rec.PublicID) == id || loc == "" {
			t.Errorf("the expired key: record %s %s, want completed under a new id", rec.Status, ptr.Deref(rec.PublicID))
		}
		// The discarded intent's trail outlives it.
		if events := a.intentEvents(admin, id); len(events) != 2 || events[1]["consumer"] != nil || events[1]["reason"] != want["reason"] {
			t.Errorf("the old intent's trail = %v, want its attempt and its discard, its consumer no longer known", events)
		}
	})
}

// An abandoned intent is discarded as a failed one is; a retry with its
// key is then refused, not run.
func TestDiscardAbandonedIntent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		a.plantRecord("acme", "order-4002", acmeBody, "abandoned", -time.Minute)
		// never sent: its owner went before the vendor could hear of it, so the vendor is not asked
		if err := a.db.Gorm.Model(&idempotency.Record{}).Where("idempotency_key = ?", "order-4002").Update("phase", "reserved").Error; err != nil {
			t.Fatal(err)
		}
		id := ptr.Deref(a.record("order-4002").PublicID)
		admin := bearer(a.token("ops", auth.IntentsManage))
		if got := a.discard(admin, id, `{"reason":"never sent"}`).wantStatus(http.StatusOK).json()["data"].(map[string]any); got["status"] != idempotency.StatusDiscarded {
			t.Errorf("discarded = %v", got)
		}
		a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-4002")...).wantError(http.StatusConflict, "intent_discarded")
		a.wantVendorCalls("", 0)
	})
}

// Only failed and abandoned intents are discarded: pending, processing,
// completed, superseded and discarded ones are 409 intent_not_discardable
// and stay exactly as they were, with no event; an unknown id is 404.
func TestOnlyFailedOrAbandonedIntentsAreDiscarded(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		admin := bearer(a.token("ops", auth.IntentsManage))
		a.vendor.script("POST", reply{status: 500, body: `{}`, commit: true})
		ids := map[string]string{
			idempotency.StatusPending: a.do(http.MethodPost, "/api/licenses", `{"name":"P","domain":"p.test"}`, keyed(acme, "k-pending")...).pendingOperation(),
		}
		a.do(http.MethodPost, "/api/licenses", `{"name":"C","domain":"c.test"}`, keyed(acme, "k-completed")...).wantStatus(http.StatusCreated)
		a.plantRecord("acme", "k-processing", acmeBody, "processing", time.Minute)
		a.plantRecord("acme", "k-superseded", acmeBody, "superseded", -time.Minute)
		a.plantRecord("acme", "k-discarded", acmeBody, idempotency.StatusFailed, -time.Minute)
		for status, key := range map[string]string{idempotency.StatusCompleted: "k-completed", "processing": "k-processing",
			"superseded": "k-superseded", idempotency.StatusDiscarded: "k-discarded"} {
			ids[status] = ptr.Deref(a.record(key).PublicID)
		}
		a.discard(admin, ids[idempotency.StatusDiscarded], `{"reason":"first"}`).wantStatus(http.StatusOK)
		for status, id := range ids {
			before := a.shownIntent(admin, id)
			if before["status"] != status {
				t.Fatalf("intent %s is %v, want %s", id, before["status"], status)
			}
			a.discard(admin, id, `{"reason":"try"}`).wantError(http.StatusConflict, "intent_not_discardable")
			sameObject(t, status+" intent after a refused discard", before, a.shownIntent(admin, id))
			wantEvents := 0
			if status == idempotency.StatusDiscarded {
				wantEvents = 1 // its own discard
			}
			if got := a.intentEvents(admin, id); len(got) != wantEvents {
				t.Errorf("%s: events %v, want %d", status, got, wantEvents)
			}
		}
		a.discard(admin, "01NOSUCHINTENT000000000000", `{"reason":"x"}`).wantStatus(http.StatusNotFound)
		a.do(http.MethodGet, "/api/intents/01NOSUCHINTENT000000000000/events", "", admin...).wantStatus(http.StatusNotFound)
		// intents:manage only.
		a.discard(acme, ids[idempotency.StatusPending], `{"reason":"x"}`).wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodGet, "/api/intents/"+ids[idempotency.StatusPending]+"/events", "", acme...).wantError(http.StatusForbidden, "missing_ability")
	})
}

// The reason is required, 1–500 characters of valid UTF-8 after trimming:
// anything else is Laravel's 422 on reason (no body at all is 400, another
// Content-Type 415), and the intent does not change.
func TestDiscardReasonIsValidated(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.consumer("acme")
		a.plantRecord("acme", "order-4003", acmeBody, idempotency.StatusFailed, time.Hour)
		id := ptr.Deref(a.record("order-4003").PublicID)
		admin := bearer(a.token("ops", auth.IntentsManage))
		for name, tc := range map[string]struct{ body, message string }{
			"absent":       {`{}`, "The reason field is required."},
			"null":         {`{"reason":null}`, "The reason field is required."},
			"blank":        {`{"reason":" \t "}`, "The reason field is required."},
			"a number":     {`{"reason":42}`, "The reason field must be a string."},
			"501 runes":    {`{"reason":"` + strings.Repeat("é", 501) + `"}`, "The reason field must not be greater than 500 characters."},
			"invalid utf8": {"{\"reason\":\"bad \xff byte\"}", "The reason field must be valid UTF-8."},
		} {
			m := a.discard(admin, id, tc.body).wantError(http.StatusUnprocessableEntity, "")
			errs, _ := m["errors"].(map[string]any)
			if msgs, _ := errs["reason"].([]any); len(msgs) != 1 || msgs[0] != tc.message || m["message"] != tc.message {
				t.Errorf("%s: %v, want %q on reason", name, m, tc.message)
			}
		}
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", "", admin...).wantError(http.StatusBadRequest, "malformed_json")
		a.do(http.MethodPost, "/api/intents/"+id+"/discard", `{"reason":"x"}`, append(admin, "Content-Type", "text/plain")...).
			wantError(http.StatusUnsupportedMediaType, "unsupported_media_type")
		if rec := a.record("order-4003"); rec.Status != idempotency.StatusFailed {
			t.Fatalf("after refused discards the intent is %s", rec.Status)
		}
		if got := a.intentEvents(admin, id); len(got) != 0 {
			t.Errorf("refused discards left events: %v", got)
		}
		long := strings.Repeat("é", 500) // 500 characters, 1000 bytes: the limit counts characters
		if e := a.discard(admin, id, `{"reason":"`+long+`"}`).wantStatus(http.StatusOK); e.json()["data"].(map[string]any)["status"] != idempotency.StatusDiscarded {
			t.Errorf("a 500-character reason: %s", e.Body.String())
		}
		if got := a.intentEvents(admin, id); len(got) != 1 || got[0]["reason"] != long {
			t.Errorf("the 500-character reason is not kept whole: %v", got)
		}
	})
}

// A discard or a retry and its audit event are one transaction: when the
// event cannot be written, the intent's status does not change either.
func TestDiscardAndRetryCommitWithTheirEvent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.consumer("acme")
		a.plantRecord("acme", "order-4004", acmeBody, idempotency.StatusFailed, time.Hour)
		id := ptr.Deref(a.record("order-4004").PublicID)
		admin := bearer(a.token("ops", auth.IntentsManage))
		fault := testdb.Inject(t, db.Gorm, "create", audit.Event{}.TableName(), nil, errors.New("injected"))
		fault.Arm(1)
		a.discard(admin, id, `{"reason":"x"}`).wantStatus(http.StatusInternalServerError)
		fault.Arm(1)
		a.do(http.MethodPost, "/api/intents/"+id+"/retry", "", admin...).wantStatus(http.StatusInternalServerError)
		if rec := a.record("order-4004"); rec.Status != idempotency.StatusFailed || fault.Hits() != 2 {
			t.Fatalf("after two changes whose event failed (%d hits): %s, want failed", fault.Hits(), rec.Status)
		}
		if got := a.intentEvents(admin, id); len(got) != 0 {
			t.Errorf("events = %v, want none", got)
		}
		a.discard(admin, id, `{"reason":"x"}`).wantStatus(http.StatusOK)
		if got := a.intentEvents(admin, id); len(got) != 1 {
			t.Errorf("events = %v, want the discard", got)
		}
	})
}

// A retry of a failed intent is in its audit trail too: by the token that
// asked, or by the console.
func TestRetryIsInTheAuditTrail(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.consumer("acme")
		a.plantRecord("acme", "order-4005", acmeBody, idempotency.StatusFailed, time.Hour)
		a.plantRecord("acme", "order-4006", acmeBody, idempotency.StatusFailed, time.Hour)
		api, cli := ptr.Deref(a.record("order-4005").PublicID), ptr.Deref(a.record("order-4006").PublicID)
		ops := a.issued("ops", auth.IntentsManage)
		a.do(http.MethodPost, "/api/intents/"+api+"/retry", "", append(bearer(ops.Secret), "X-Request-Id", "req-retry")...).wantStatus(http.StatusOK)
		a.runCLI("intents", "retry", cli)
		for id, want := range map[string]map[string]any{
			api: {"actor": audit.ActorToken, "actor_token_id": ops.ID, "actor_consumer": "ops", "request_id": "req-retry"},
			cli: {"actor": audit.ActorConsole, "actor_token_id": nil, "actor_consumer": nil, "request_id": nil},
		} {
			events := a.intentEvents(bearer(ops.Secret), id)
			if len(events) != 1 || events[0]["event"] != audit.IntentRetried || events[0]["reason"] != nil || events[0]["consumer"] != "acme" {
				t.Fatalf("events of %s = %v, want one retry", id, events)
			}
			for k, v := range want {
				if events[0][k] != v {
					t.Errorf("retry of %s: %s = %#v, want %#v", id, k, events[0][k], v)
				}
			}
		}
		// A refused retry is no event.
		a.do(http.MethodPost, "/api/intents/"+api+"/retry", "", bearer(ops.Secret)...).wantError(http.StatusConflict, "intent_not_failed")
		if n := len(a.intentEvents(bearer(ops.Secret), api)); n != 1 {
			t.Errorf("%d events after a refused retry, want 1", n)
		}
	})
}

// `licensor intents discard ID --reason TEXT` discards as the API does,
// with the actor console, and prints the intent as `intents show` does;
// without a reason or with a bad one it is a usage error (exit 2), and an
// intent that is not discardable, or unknown, fails as `intents retry`
// does (exit 1). `intents events --json` prints the API's objects.
func TestDiscardFromTheCLI(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.consumer("acme")
		a.plantRecord("acme", "order-4007", acmeBody, idempotency.StatusFailed, time.Hour)
		id := ptr.Deref(a.record("order-4007").PublicID)
		admin := bearer(a.token("ops", auth.IntentsManage))
		for _, args := range [][]string{
			{"intents", "discard", id},
			{"intents", "discard", id, "--reason", "  "},
			{"intents", "discard", id, "--reason", strings.Repeat("x", 501)},
			{"intents", "discard", id, "--reason", "bad \xff byte"},
			{"intents", "discard", "--reason", "why"},
		} {
			if err := a.runCLIErr(args...); console.ExitCode(err) != 2 {
				t.Errorf("licensor %q: %v (exit %d), want a usage error", args, err, console.ExitCode(err))
			}
		}
		if rec := a.record("order-4007"); rec.Status != idempotency.StatusFailed {
			t.Fatalf("refused discards changed the intent: %s", rec.Status)
		}
		out := string(a.runCLI("intents", "discard", id, "--reason", "duplicate of order 4008"))
		if !strings.Contains(out, "status") || !strings.Contains(out, idempotency.StatusDiscarded) || !strings.Contains(out, id) {
			t.Errorf("intents discard printed:\n%s", out)
		}
		var shown map[string]any
		if err := json.Unmarshal(a.runCLI("intents", "show", id, "--json"), &shown); err != nil || shown["status"] != idempotency.StatusDiscarded {
			t.Errorf("intents show after the discard: %v, %v", shown, err)
		}
		for _, args := range [][]string{{"intents", "discard", id, "--reason", "again"}, {"intents", "discard", "01NOSUCHINTENT000000000000", "--reason", "x"}} {
			if err := a.runCLIErr(args...); console.ExitCode(err) != 1 {
				t.Errorf("licensor %q: %v (exit %d), want exit 1", args, err, console.ExitCode(err))
			}
		}
		api := a.intentEvents(admin, id)
		if len(api) != 1 || api[0]["actor"] != audit.ActorConsole || api[0]["reason"] != "duplicate of order 4008" ||
			api[0]["actor_token_id"] != nil || api[0]["request_id"] != nil {
			t.Fatalf("events = %v, want the console's discard with its reason", api)
		}
		var cli []map[string]any
		if out := a.runCLI("intents", "events", id, "--json"); json.Unmarshal(out, &cli) != nil || len(cli) != 1 {
			t.Fatalf("intents events --json:\n%s", out)
		}
		sameObject(t, "the discard event", api[0], cli[0])
		if out := string(a.runCLI("intents", "events", id)); !strings.Contains(out, `"duplicate of order 4008"`) || !strings.Contains(out, audit.ActorConsole) {
			t.Errorf("intents events prints:\n%s", out)
		}
	})
}

// The pruner deletes an expired discarded intent like the other settled
// ones; its audit trail stays listed under its id.
func TestPrunerDeletesExpiredDiscardedIntents(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		a.consumer("acme")
		a.plantRecord("acme", "order-4009", acmeBody, "abandoned", -time.Minute)
		id := ptr.Deref(a.record("order-4009").PublicID)
		admin := bearer(a.token("ops", auth.IntentsManage))
		a.discard(admin, id, `{"reason":"stale"}`).wantStatus(http.StatusOK)
		if n, _, err := a.app.Pruner.RunOnce(context.Background()); err != nil || n != 0 {
			t.Fatalf("prune before expiry: %d, %v; want nothing", n, err)
		}
		clk.Advance(2 * time.Hour)
		if n, _, err := a.app.Pruner.RunOnce(context.Background()); err != nil || n != 1 {
			t.Fatalf("prune after expiry: %d, %v; want the discarded intent", n, err)
		}
		a.do(http.MethodGet, "/api/intents/"+id, "", admin...).wantStatus(http.StatusNotFound)
		if got := a.intentEvents(admin, id); len(got) != 1 || got[0]["consumer"] != nil || got[0]["reason"] != "stale" {
			t.Errorf("the pruned intent's trail = %v", got)
		}
	})
}

// A vendor event whose intent an operator discarded is received on its
// redelivery (the vendor stops sending it) and never applied.
func TestDiscardedVendorEventIsReceivedNotApplied(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		now := time.Now()
		body := vendorEventBody("evt_discarded", "site.suspended", now.Add(-time.Minute), lic["vendor_site_id"].(string), "")
		op := a.app.Operations.VendorEvent.Name
		stamp := dbtime.Stamp(now)
		_, fingerprint := eventIntent(t, op, body)
		rec := idempotency.Record{ConsumerID: "vendor", Operation: op, Key: "evt_discarded",
			RequestHash: fingerprint, Status: idempotency.StatusFailed, Attempts: 11, CreatedAt: stamp, UpdatedAt: stamp, ExpiresAt: stamp.Add(time.Hour)}
		if err := db.Gorm.Create(&rec).Error; err != nil {
			t.Fatal(err)
		}
		// At the command line: the API's intent resource names the consumers' operations only (for now).
		a.runCLI("intents", "discard", ptr.Deref(rec.PublicID), "--reason", "the site was restored by hand")
		if got := a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK).Body.String(); got != `{"received":true}` {
			t.Errorf("redelivery answered %s", got)
		}
		if got := a.do(http.MethodGet, "/api/licenses/"+lic["id"].(string), "", acme...).wantStatus(http.StatusOK).licenseData()["status"]; got != "active" {
			t.Errorf("the license is %v after a discarded event's redelivery, want active", got)
		}
		if got := a.record("evt_discarded"); got.Status != idempotency.StatusDiscarded {
			t.Errorf("the event's intent is %s", got.Status)
		}
		if !strings.Contains(a.logs.String(), fmt.Sprintf(`"event_id":%q`, "evt_discarded")) {
			t.Errorf("the refused redelivery is not logged:\n%s", a.logs.String())
		}
	})
}

// A failed revoke is retried, never discarded: deleting a site is safe to
// repeat, and its license stays revoking until the revoke ends, so a
// discard would leave it there (and its DELETE refused) until the key
// expired. The API and the CLI refuse it (409 intent_not_discardable, exit
// 1), nothing changes, no event is written, and a retry is still allowed.
func TestAFailedRevokeIsRetriedNotDiscarded(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.consumer("acme")
		a.plantRecord("acme", "01JDQ8Z7F0A2B4C6D8E0G2H4J6", "", idempotency.StatusFailed, time.Hour)
		if err := db.Gorm.Model(&idempotency.Record{}).Where("idempotency_key = ?", "01JDQ8Z7F0A2B4C6D8E0G2H4J6").
			Update("operation", "licenses.destroy").Error; err != nil {
			t.Fatal(err)
		}
		id := ptr.Deref(a.record("01JDQ8Z7F0A2B4C6D8E0G2H4J6").PublicID)
		admin := bearer(a.token("ops", auth.IntentsManage))
		body := a.discard(admin, id, `{"reason":"stuck"}`).wantError(http.StatusConflict, "intent_not_discardable")
		if msg, _ := body["message"].(string); !strings.Contains(msg, "Retry it") {
			t.Errorf("message %q does not say to retry it", msg)
		}
		if err := a.runCLIErr("intents", "discard", id, "--reason", "stuck"); console.ExitCode(err) != 1 || !errors.Is(err, idempotency.ErrRetryOnly) {
			t.Errorf("licensor intents discard of a revoke: %v (exit %d), want exit 1, retried not discarded", err, console.ExitCode(err))
		}
		if rec := a.record("01JDQ8Z7F0A2B4C6D8E0G2H4J6"); rec.Status != idempotency.StatusFailed {
			t.Errorf("the refused discards left it %s, want failed", rec.Status)
		}
		if got := a.intentEvents(admin, id); len(got) != 0 {
			t.Errorf("events %v after refused discards, want none", got)
		}
		a.do(http.MethodPost, "/api/intents/"+id+"/retry", "", admin...).wantStatus(http.StatusOK)
	})
}

// Discarding a failed create whose vendor call went through first makes
// sure the vendor keeps no site for it that nobody holds: such a site is
// deleted, then the intent is discarded; a vendor that cannot be asked is
// 503 vendor_unavailable and nothing changes (no delete, the intent still
// failed); a site a license holds is never deleted.
func TestDiscardClearsTheVendorSiteNobodyHolds(t *testing.T) {
	const reason = `{"reason":"the customer cancelled"}`
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Run("a site nobody holds is deleted", func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			a := newApp(t, db, withClock(clk))
			a.failIntentAfterItsSite(clk, a.consumer("acme"), "order-4101")
			if a.vendor.siteCount() != 1 {
				t.Fatalf("the vendor holds %d sites, want the create's 1", a.vendor.siteCount())
			}
			admin := bearer(a.token("ops", auth.IntentsManage))
			id := ptr.Deref(a.record("order-4101").PublicID)
			got := a.discard(admin, id, reason).wantStatus(http.StatusOK).json()["data"].(map[string]any)
			if got["status"] != idempotency.StatusDiscarded {
				t.Errorf("discarded = %v", got)
			}
			a.wantVendorCalls("DELETE", 1)
			if a.vendor.siteCount() != 0 {
				t.Errorf("the vendor still holds %d sites, want the orphan deleted", a.vendor.siteCount())
			}
		})
		t.Run("a vendor that cannot be asked changes nothing", func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			a := newApp(t, db, withClock(clk))
			a.failIntentAfterItsSite(clk, a.consumer("acme"), "order-4102")
			admin := bearer(a.token("ops", auth.IntentsManage))
			before := a.record("order-4102")
			a.vendor.script("GET", reply{status: 503, body: `{}`})
			a.discard(admin, ptr.Deref(before.PublicID), reason).wantError(http.StatusServiceUnavailable, "vendor_unavailable")
			a.wantVendorCalls("DELETE", 0)
			after := a.record("order-4102")
			if after.Status != idempotency.StatusFailed || !after.LockedUntil.Equal(*before.LockedUntil) || a.vendor.siteCount() != 1 {
				t.Errorf("after the refused discard: %s until %v, %d sites; want failed until %v as before, the site kept",
					after.Status, after.LockedUntil, a.vendor.siteCount(), before.LockedUntil)
			}
			if events := a.intentEvents(admin, ptr.Deref(before.PublicID)); len(events) != 0 {
				t.Errorf("events = %v, want none", events)
			}
			a.discard(admin, ptr.Deref(before.PublicID), reason).wantStatus(http.StatusOK) // once the vendor answers
			a.wantVendorCalls("DELETE", 1)
		})
		t.Run("a discard that dies before it commits is abandoned, never resumed", func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			a := newApp(t, db, withClock(clk))
			a.failIntentAfterItsSite(clk, a.consumer("acme"), "order-4104")
			admin := bearer(a.token("ops", auth.IntentsManage))
			id := ptr.Deref(a.record("order-4104").PublicID)
			// The process dies after the vendor's DELETE: neither the discard
			// nor the putting back reaches the database.
			died := testdb.Inject(t, a.db.Gorm, "update", "idempotency_keys", func(tx *gorm.DB) bool {
				set, ok := tx.Statement.Dest.(map[string]any)
				return ok && (set["status"] == idempotency.StatusDiscarded || set["status"] == idempotency.StatusFailed)
			}, errors.New("the process died"))
			died.Arm(2)
			if r := a.discard(admin, id, reason); r.Code < 500 {
				t.Fatalf("a discard that could not commit answered %d: %s", r.Code, r.Body.String())
			}
			a.wantVendorCalls("DELETE", 1)
			creates := a.vendor.count("POST")
			clk.Advance(10 * time.Minute) // past its lease, twice over
			a.reconcileOnce(a.reconciler())
			if got := a.record("order-4104"); got.Status != "abandoned" {
				t.Errorf("after the reconciler the intent is %s, want abandoned", got.Status)
			}
			if a.vendor.count("POST") != creates || a.vendor.siteCount() != 0 {
				t.Errorf("the reconciler created again (%d creates, was %d; %d sites): it resumed the create being discarded",
					a.vendor.count("POST"), creates, a.vendor.siteCount())
			}
		})
		t.Run("another open intent for the domain keeps its site", func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			a := newApp(t, db, withClock(clk))
			a.failIntentAfterItsSite(clk, a.consumer("acme"), "order-4105")
			// Another intent for the same domain, pending: the site may be its.
			other := a.record("order-4105")
			other.ID, other.Key, other.Status = 0, "order-4106", idempotency.StatusPending
			otherID := ulid.Make().String()
			other.PublicID = &otherID
			if err := a.db.Gorm.Create(&other).Error; err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.db.Gorm.Delete(&idempotency.Record{}, other.ID) }) // the next subtests share the database
			admin := bearer(a.token("ops", auth.IntentsManage))
			a.discard(admin, ptr.Deref(a.record("order-4105").PublicID), reason).wantError(http.StatusConflict, "intent_not_discardable")
			a.wantVendorCalls("DELETE", 0)
			if got := a.record("order-4105"); got.Status != idempotency.StatusFailed {
				t.Errorf("after the refused discard the intent is %s, want failed as it was", got.Status)
			}
		})
		t.Run("a site a license holds is never deleted", func(t *testing.T) {
			clk := testkit.NewClock(time.Now())
			a := newApp(t, db, withClock(clk))
			a.failIntentAfterItsSite(clk, a.consumer("acme"), "order-4103")
			a.do(http.MethodPost, "/api/licenses", acmeBody, a.consumer("globex")...).wantStatus(http.StatusCreated) // adopts the site
			admin := bearer(a.token("ops", auth.IntentsManage))
			a.discard(admin, ptr.Deref(a.record("order-4103").PublicID), reason).wantStatus(http.StatusOK)
			a.wantVendorCalls("DELETE", 0)
			if a.vendor.siteCount() != 1 {
				t.Errorf("the vendor holds %d sites, want globex's kept", a.vendor.siteCount())
			}
		})
	})
}

// A retry with the key and body of an intent whose owner is at work (its
// lease alive: here a discard's claim) waits, 409 request_in_progress, even
// once the intent is past IDEMPOTENCY_TTL: expiry frees a settled key, never
// one under a live lease. Else the retry's create could adopt the site the
// discard is deleting.
func TestALiveLeaseOutlivesExpiry(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		acme := a.consumer("acme")
		a.failIntentAfterItsSite(clk, acme, "order-4201")
		err := a.db.Gorm.Model(&idempotency.Record{}).Where("idempotency_key = ?", "order-4201").
			Updates(map[string]any{"status": "processing", "locked_until": clk.Now().Add(time.Minute),
				"expires_at": clk.Now().Add(-time.Second)}).Error
		if err != nil {
			t.Fatal(err)
		}
		posts := a.vendor.count("POST")
		a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-4201")...).wantError(http.StatusConflict, "request_in_progress")
		if a.vendor.count("POST") != posts {
			t.Errorf("the retry reached the vendor while the intent's owner held its lease")
		}
		if got := a.record("order-4201"); got.Status != "processing" {
			t.Errorf("the intent is %s, want processing, its owner's", got.Status)
		}
	})
}
