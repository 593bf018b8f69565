package tests

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
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
			keyOf[a.record(p.key).Ref()] = p.key
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
