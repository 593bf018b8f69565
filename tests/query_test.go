package tests

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The expected results of these tests are Laravel 12's rule, not what
// licensor answered: Request::input() is getInputSource()->all() +
// query->all(), PHP's array union, so the input is the body's keys and
// then the query's keys the body lacks (a key the body has wins whole),
// the query read by parse_str (a[]=x and a[0]=x are arrays).

// A create whose input is in the query string: an empty body takes the
// query's fields, a body's field wins over the query's, a form body merges
// too, and the merged input is the intent the idempotency key names.
func TestQueryStringMergesIntoTheInput(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)

		made := a.do(http.MethodPost, "/api/licenses?name=Q&domain=q.test", "", a.consumer("q")...).wantStatus(http.StatusCreated).licenseData()
		if made["name"] != "Q" || made["domain"] != "q.test" {
			t.Errorf("an empty body with ?name=Q&domain=q.test made %v, want the query's license", made)
		}

		made = a.do(http.MethodPost, "/api/licenses?domain=query.test&name=Query", `{"domain":"acme.test"}`, a.consumer("acme")...).wantStatus(http.StatusCreated).licenseData()
		if made["name"] != "Query" || made["domain"] != "acme.test" {
			t.Errorf("body domain + query name/domain made %v, want name Query (query) and domain acme.test (the body wins)", made)
		}

		made = a.do(http.MethodPost, "/api/licenses?domain=globex.test&name=Query", "name=Globex", form(a.consumer("globex"))...).wantStatus(http.StatusCreated).licenseData()
		if made["name"] != "Globex" || made["domain"] != "globex.test" {
			t.Errorf("a form's name + the query's domain made %v, want Globex at globex.test", made)
		}

		// Keyed: the same query is the same intent (a replay), another
		// query value is another intent under the same key.
		initech := a.consumer("initech")
		first := a.do(http.MethodPost, "/api/licenses?name=Initech&domain=initech.test", "", keyed(initech, "query-1")...).wantStatus(http.StatusCreated)
		calls := a.vendor.count("")
		r := a.do(http.MethodPost, "/api/licenses?name=Initech&domain=initech.test", "", keyed(initech, "query-1")...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" || r.Body.String() != first.Body.String() {
			t.Errorf("the same query again is not a replay: %v %s", r.Header(), r.Body.String())
		}
		a.do(http.MethodPost, "/api/licenses", `{"name":"Initech","domain":"initech.test"}`, keyed(initech, "query-1")...).wantStatus(http.StatusCreated)
		a.do(http.MethodPost, "/api/licenses?name=Initech&domain=other.test", "", keyed(initech, "query-1")...).
			wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
		// The body winning, a query under it changes nothing of the intent.
		a.do(http.MethodPost, "/api/licenses?domain=other.test", `{"name":"Initech","domain":"initech.test"}`, keyed(initech, "query-1")...).wantStatus(http.StatusCreated)
		if n := a.vendor.count(""); n != calls {
			t.Errorf("the vendor was called %d more times by the retries", n-calls)
		}
	})
}

// POST /api/tokens reads its abilities from the query's PHP array when the
// body has none; a body's abilities win whole (no merge of their items).
func TestQueryStringArraysOnTokens(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		for path, want := range map[string][]any{
			"/api/tokens?abilities[]=licenses:read":                                      {auth.LicensesRead},
			"/api/tokens?abilities%5B0%5D=licenses:read&abilities%5B1%5D=licenses:write": {auth.LicensesRead, auth.LicensesWrite},
		} {
			data := a.do(http.MethodPost, path, `{"consumer":"globex"}`, root...).wantStatus(http.StatusCreated).json()["data"].(map[string]any)
			if !reflect.DeepEqual(data["abilities"], want) || data["consumer"] != "globex" {
				t.Errorf("%s issued %v, want abilities %v for globex", path, data, want)
			}
		}
		data := a.do(http.MethodPost, "/api/tokens?abilities[]=licenses:read&consumer=other", `{"consumer":"globex","abilities":["licenses:write"]}`, root...).
			wantStatus(http.StatusCreated).json()["data"].(map[string]any)
		if !reflect.DeepEqual(data["abilities"], []any{auth.LicensesWrite}) || data["consumer"] != "globex" {
			t.Errorf("the body's abilities and consumer did not win: %v", data)
		}
	})
}

// The signed vendor webhook's body is never rewritten (its signature covers
// the bytes), a query string or not; a body that is not a JSON object, or
// not JSON, is refused exactly as without a query.
func TestQueryStringLeavesOtherBodiesAsTheyAre(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		now := time.Now()
		body := vendorEventBody("evt_query", "site.suspended", now.Add(-time.Minute), lic["vendor_site_id"].(string), "")
		a.do(http.MethodPost, "/api/webhooks/vendor?extra=1&id=other", body,
			"Content-Type", "application/json", "Vendor-Signature", signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
		a.wantLicenseStatus(t, acme, lic["id"].(string), "suspended", "status after a signed webhook with a query = %v, want suspended")

		globex := a.consumer("globex")
		for _, bad := range []string{`{"name":"Globex",`, `[{"name":"Globex","domain":"globex.test"}]`, `"x"`} {
			a.do(http.MethodPost, "/api/licenses?name=Globex&domain=globex.test", bad, globex...).wantError(http.StatusBadRequest, "malformed_json")
		}
		a.do(http.MethodPost, "/api/licenses?name=Globex&domain=globex.test", "name=Globex", append(globex, "Content-Type", "text/plain")...).
			wantError(http.StatusUnsupportedMediaType, "unsupported_media_type")
		if n := a.licenseRows(); n != 1 {
			t.Errorf("%d licenses, want only acme's", n)
		}
	})
}
