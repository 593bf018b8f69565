package tests

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// GET /api/intents filters by operation (by its exact name, one the server
// declares) and by age (older_than: created before now less a duration),
// with the other filters; anything else is 422 on its field.
func TestIntentsListFiltersByOperationAndAge(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		a.consumer("acme")
		a.consumer("globex")
		admin := bearer(a.token("ops", auth.IntentsManage))
		planted := []struct {
			key, consumer, operation string
			age                      time.Duration
		}{
			{"store-old", "acme", "licenses.store", 3 * time.Hour},
			{"store-new", "acme", "licenses.store", 10 * time.Minute},
			{"destroy-old", "acme", "licenses.destroy", 3 * time.Hour},
			{"vendor-new", "globex", "webhooks.vendor", time.Minute},
			{"globex-old", "globex", "licenses.store", 5 * time.Hour},
		}
		keyOf := map[string]string{}
		for _, p := range planted {
			a.plantRecord(p.consumer, p.key, acmeBody, idempotency.StatusFailed, time.Hour)
			if err := a.db.Gorm.Model(&idempotency.Record{}).Where("idempotency_key = ?", p.key).
				Updates(map[string]any{"operation": p.operation, "created_at": clk.Now().UTC().Add(-p.age)}).Error; err != nil {
				t.Fatal(err)
			}
			keyOf[ptr.Deref(a.record(p.key).PublicID)] = p.key
		}
		list := func(query string) string {
			t.Helper()
			var keys []string
			for _, in := range a.do(http.MethodGet, "/api/intents"+query, "", admin...).wantStatus(http.StatusOK).json()["data"].([]any) {
				keys = append(keys, keyOf[in.(map[string]any)["id"].(string)])
			}
			slices.Sort(keys)
			return strings.Join(keys, ",")
		}
		for query, want := range map[string]string{
			"":                            "destroy-old,globex-old,store-new,store-old,vendor-new",
			"?operation=licenses.store":   "globex-old,store-new,store-old",
			"?operation=licenses.destroy": "destroy-old",
			"?operation=webhooks.vendor":  "vendor-new",
			"?older_than=2h":              "destroy-old,globex-old,store-old",
			"?older_than=1h30m&operation=licenses.store":                          "globex-old,store-old",
			"?older_than=4h&consumer=globex":                                      "globex-old",
			"?older_than=5m&operation=licenses.store&consumer=acme&status=failed": "store-new,store-old",
			"?older_than=5m&status=pending":                                       "",
			"?older_than=8760h":                                                   "",
			"?older_than=2m&operation=webhooks.vendor":                            "",
		} {
			if got := list(query); got != want {
				t.Errorf("GET /api/intents%s = %q, want %q", query, got, want)
			}
		}
		for query, field := range map[string]string{
			"?operation=licenses.nope":  "operation",
			"?operation=LICENSES.STORE": "operation",
			"?operation=licenses.%2A":   "operation",
			"?older_than=0":             "older_than",
			"?older_than=-5m":           "older_than",
			"?older_than=15":            "older_than",
			"?older_than=8761h":         "older_than",
			"?older_than=a+while":       "older_than",
		} {
			body := a.do(http.MethodGet, "/api/intents"+query, "", admin...).wantStatus(http.StatusUnprocessableEntity).json()
			errs, _ := body["errors"].(map[string]any)
			if len(errs) != 1 || errs[field] == nil {
				t.Errorf("GET /api/intents%s: %v, want one error on %s", query, body, field)
			}
		}
		body := a.do(http.MethodGet, "/api/intents?operation=nope", "", admin...).wantStatus(http.StatusUnprocessableEntity).json()
		if body["message"] != "The selected operation is invalid." {
			t.Errorf("message = %v", body["message"])
		}
	})
}

// Each attempt of the reconciler at an intent is in its audit trail
// (GET /api/intents/{id}/events), by the reconciler, with what came of it
// and the class of its error, never its text. A completion that commits in
// the transaction that writes the license takes its attempt with it: when
// the attempt's event cannot be written, neither is the license (nor its
// consumer event), the intent stays pending, and the retry that follows is
// on record; the next pass completes it, once.
func TestReconcilerAttemptsAreInTheIntentsTrail(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 2 }))
		acme := a.consumer("acme")
		admin := bearer(a.token("ops", auth.IntentsManage))
		a.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
		id := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-7001")...).pendingOperation()

		fault := testdb.Inject(t, db.Gorm, "create", audit.Event{}.TableName(), nil, errors.New("injected"))
		fault.Arm(1)
		if got := results(a.reconcileOnce(a.reconciler())); got != "retry" {
			t.Fatalf("reconcile with the attempt's event failing = %q, want retry", got)
		}
		if fault.Hits() != 1 || a.licenseRows() != 0 {
			t.Fatalf("%d hits, %d licenses; want the completion rolled back with its event", fault.Hits(), a.licenseRows())
		}
		var consumerEvents int64
		if err := db.Gorm.Table("consumer_events").Count(&consumerEvents).Error; err != nil || consumerEvents != 0 {
			t.Fatalf("%d consumer events (%v), want none", consumerEvents, err)
		}
		rec := a.record("order-7001")
		if rec.Status != idempotency.StatusPending || rec.Attempts != 2 {
			t.Fatalf("record = %s, %d attempts; want pending, 2", rec.Status, rec.Attempts)
		}
		events := a.intentEvents(admin, id)
		wantNext := rec.LockedUntil.UTC().Format("2006-01-02T15:04:05.000000Z")
		if len(events) != 1 || events[0]["event"] != audit.IntentAttempted || events[0]["reason"] != "attempt 2: retry (error), next at "+wantNext {
			t.Fatalf("events = %v, want the retry", events)
		}
		clk.Set(rec.LockedUntil.Add(time.Second))
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile = %q, want completed", got)
		}
		if a.licenseRows() != 1 || a.vendor.siteCount() != 1 {
			t.Errorf("%d licenses, %d sites; want 1 and 1", a.licenseRows(), a.vendor.siteCount())
		}
		events = a.intentEvents(admin, id)
		if len(events) != 2 || events[1]["reason"] != "attempt 3: completed" {
			t.Fatalf("events = %v, want the retry then the completion", events)
		}
		for _, e := range events {
			if e["actor"] != audit.ActorReconciler || e["actor_token_id"] != nil || e["actor_consumer"] != nil || e["request_id"] != nil ||
				e["consumer"] != "acme" || e["intent_id"] != id {
				t.Errorf("event = %v, want the reconciler's on acme's intent", e)
			}
		}

		// A vendor that is down: the retry names its class, never the vendor's answer.
		a.vendor.script("POST", reply{status: 500, body: `{"error":"LK-LEAKED"}`})
		down := a.do(http.MethodPost, "/api/licenses", `{"name":"Globex","domain":"globex.test"}`, keyed(acme, "order-7002")...).pendingOperation()
		a.vendor.script("GET", reply{status: 503, body: `{"error":"LK-LEAKED"}`})
		if got := results(a.reconcileOnce(a.reconciler())); got != "retry" {
			t.Fatalf("reconcile with the vendor down = %q, want retry", got)
		}
		next := a.record("order-7002").LockedUntil.UTC().Format("2006-01-02T15:04:05.000000Z")
		events = a.intentEvents(admin, down)
		if len(events) != 1 || events[0]["reason"] != "attempt 2: retry (vendor_unavailable), next at "+next {
			t.Errorf("events of the intent the vendor is down for = %v", events)
		}
		if body := a.do(http.MethodGet, "/api/intents/"+down+"/events", "", admin...).Body.String(); strings.Contains(body, "LK-") {
			t.Errorf("the trail shows the vendor's answer: %s", body)
		}
	})
}
