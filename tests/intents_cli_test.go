package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

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

// runCLI runs `licensor args…` in process on the app's database and
// APP_KEY, as an operator on the server's machine would, and returns its
// stdout.
func (a *app) runCLI(args ...string) []byte {
	a.t.Helper()
	vars := map[string]string{"APP_ENV": config.EnvTesting, "APP_KEY": config.EncodeKey(testKey)}
	if a.db.Dialect == database.MySQL {
		vars["DB_CONNECTION"], vars["DB_URL"] = "mysql", a.db.Config.URL
	} else {
		vars["DB_DATABASE"] = a.db.Config.Database
	}
	var stdout, stderr bytes.Buffer
	if err := console.Run(context.Background(), args, func(k string) string { return vars[k] }, &stdout, &stderr); err != nil {
		a.t.Fatalf("licensor %q: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// sameObject fails the test for every key on which the CLI's object and
// the API's differ: a key one has and the other lacks, or another value
// (null included).
func sameObject(t *testing.T, what string, api, cli map[string]any) {
	t.Helper()
	keys := map[string]bool{}
	for k := range api {
		keys[k] = true
	}
	for k := range cli {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		av, inAPI := api[k]
		cv, inCLI := cli[k]
		switch {
		case !inCLI:
			t.Errorf("%s: the API has %s = %#v, the CLI has no %s", what, k, av, k)
		case !inAPI:
			t.Errorf("%s: the CLI has %s = %#v, the API has no %s", what, k, cv, k)
		case !reflect.DeepEqual(av, cv):
			t.Errorf("%s: %s is %#v from the API, %#v from the CLI", what, k, av, cv)
		}
	}
}

// The CLI's --json is the API's JSON: `licensor intents list --json` and
// `intents show ID --json` print, for every intent, the very object that
// GET /api/intents and GET /api/intents/{id} answer, key for key and value
// for value (nulls, absent keys and times included), over the same
// database: intents of every status (abandoned, superseded and discarded included), a
// keyless create, a revoke, and one
// whose consumer is no longer on record.
func TestIntentsCLIJSONIsTheAPIs(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		acme, globex := a.consumer("acme"), a.consumer("globex")
		failed := a.failIntent(acme, "cli-key-3101", acmeBody, clk)
		a.vendor.script("POST", reply{status: 500, body: `{}`, commit: true})
		pending := a.do(http.MethodPost, "/api/licenses", `{"name":"G","domain":"g.test"}`, keyed(globex, "cli-key-3102")...).pendingOperation()
		license := a.create(globex, "done.test") // keyless: the server's key
		a.do(http.MethodDelete, "/api/licenses/"+license, "", globex...).wantStatus(http.StatusNoContent)
		a.plantRecord("acme", "cli-key-3103", acmeBody, "processing", time.Minute)
		now := dbtime.Now()
		orphan := idempotency.Record{ConsumerID: "01JGONE0CONSVMER0000000000", Operation: "licenses.store", Key: "cli-key-3104",
			RequestHash: "h", Status: idempotency.StatusFailed, Attempts: 3, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := db.Gorm.Create(&orphan).Error; err != nil {
			t.Fatal(err)
		}
		a.plantRecord("acme", "cli-key-3105", `{"name":"Acme","domain":"gone.test"}`, "abandoned", -time.Minute)
		a.plantRecord("acme", "cli-key-3106", `{"name":"Acme","domain":"moot.test"}`, "superseded", -time.Minute)
		a.plantRecord("acme", "cli-key-3107", `{"name":"Acme","domain":"dropped.test"}`, idempotency.StatusDiscarded, -time.Minute)
		admin := bearer(a.token("ops", auth.IntentsManage))

		apiList := a.do(http.MethodGet, "/api/intents?per_page=100", "", admin...).wantStatus(http.StatusOK).json()["data"].([]any)
		var cliList []map[string]any
		if out := a.runCLI("intents", "list", "--json", "--per-page", "100"); json.Unmarshal(out, &cliList) != nil {
			t.Fatalf("intents list --json is not a JSON array of objects:\n%s", out)
		}
		if len(apiList) != 9 || len(cliList) != len(apiList) {
			t.Fatalf("the API lists %d intents, the CLI %d; want 9 each", len(apiList), len(cliList))
		}
		seen := map[string]map[string]any{}
		for i, v := range apiList {
			api := v.(map[string]any)
			id, _ := api["id"].(string)
			sameObject(t, fmt.Sprintf("intent %d (%s) of the list", i, id), api, cliList[i])
			seen[id] = api
		}
		for name, id := range map[string]string{"failed": failed, "pending": pending, "orphan": ptr.Deref(orphan.PublicID)} {
			if seen[id] == nil {
				t.Errorf("the %s intent %s is not listed", name, id)
			}
		}
		// What the comparison covers: the shapes that drifted.
		statuses, sources, consumers, results := map[any]bool{}, map[any]bool{}, map[any]bool{}, 0
		for _, in := range seen {
			statuses[in["status"]], sources[in["key_source"]], consumers[in["consumer"]] = true, true, true
			if _, ok := in["result"]; ok {
				results++
			}
		}
		for _, s := range idempotency.Statuses {
			if !statuses[s] {
				t.Errorf("no intent is %s", s)
			}
		}
		if !sources["client"] || !sources["server"] || !consumers[""] || results != 2 {
			t.Errorf("key sources %v, consumers %v, %d with a result; want client and server, an unnamed consumer, 2 completed",
				sources, consumers, results)
		}
		if seen[ptr.Deref(orphan.PublicID)]["consumer"] != "" {
			t.Errorf("an intent whose consumer is not on record: consumer %#v, want \"\"", seen[ptr.Deref(orphan.PublicID)]["consumer"])
		}

		for id := range seen {
			api := a.do(http.MethodGet, "/api/intents/"+id, "", admin...).wantStatus(http.StatusOK).json()["data"].(map[string]any)
			var cli map[string]any
			if out := a.runCLI("intents", "show", id, "--json"); json.Unmarshal(out, &cli) != nil {
				t.Fatalf("intents show %s --json is not a JSON object:\n%s", id, out)
			}
			sameObject(t, "intent "+id+" shown", api, cli)
		}
	})
}

// The statuses have one order, the contract's: docs/openapi.yaml's
// IntentStatus enum is idempotency.Statuses, which GET /api/intents?status=
// and `licensor intents list --status` accept.
func TestIntentStatusesAreTheContracts(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	ref := c.doc.Components.Schemas["IntentStatus"]
	if ref == nil || ref.Value == nil {
		t.Fatal("docs/openapi.yaml has no IntentStatus schema")
	}
	var enum []string
	for _, v := range ref.Value.Enum {
		s, _ := v.(string)
		enum = append(enum, s)
	}
	if !slices.Equal(enum, idempotency.Statuses) {
		t.Errorf("IntentStatus is %v, idempotency.Statuses %v; want one list in one order", enum, idempotency.Statuses)
	}
}
