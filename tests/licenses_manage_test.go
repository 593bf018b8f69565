package tests

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/licensor-api/licensor/tests/testdb"
)

// create makes a license and returns its id.
func (a *app) create(token []string, domain string) string {
	a.t.Helper()
	d := a.do(http.MethodPost, "/api/licenses", `{"name":"N","domain":"`+domain+`"}`, token...).
		wantStatus(http.StatusCreated).licenseData()
	return d["id"].(string)
}

// wantLicenseStatus fails the test unless the license id, read with token,
// has the status want; msg formats the status it has.
func (a *app) wantLicenseStatus(t *testing.T, token []string, id, want, msg string) {
	t.Helper()
	if got := a.do(http.MethodGet, "/api/licenses/"+id, "", token...).wantStatus(http.StatusOK).licenseData()["status"]; got != want {
		t.Errorf(msg, got)
	}
}

func TestListLicenses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme, globex := a.consumer("acme"), a.consumer("globex")
		var ids []string
		for i := range 3 {
			ids = append(ids, a.create(acme, fmt.Sprintf("shop%d.test", i)))
		}
		a.create(globex, "globex.test")

		m := a.do(http.MethodGet, "/api/licenses?per_page=2", "", acme...).wantStatus(http.StatusOK).json()
		data := m["data"].([]any)
		meta := m["meta"].(map[string]any)
		if len(data) != 2 || data[0].(map[string]any)["id"] != ids[2] || data[1].(map[string]any)["id"] != ids[1] {
			t.Errorf("page 1 = %v, want the two newest", data)
		}
		want := map[string]any{"current_page": 1.0, "per_page": 2.0, "total": 3.0, "last_page": 2.0}
		for k, v := range want {
			if meta[k] != v {
				t.Errorf("meta.%s = %v, want %v", k, meta[k], v)
			}
		}
		page2 := a.do(http.MethodGet, "/api/licenses?per_page=2&page=2", "", acme...).json()["data"].([]any)
		if len(page2) != 1 || page2[0].(map[string]any)["id"] != ids[0] {
			t.Errorf("page 2 = %v, want the oldest", page2)
		}
		def := a.do(http.MethodGet, "/api/licenses", "", globex...).json()
		if len(def["data"].([]any)) != 1 || def["meta"].(map[string]any)["per_page"] != 15.0 {
			t.Errorf("globex sees %v", def)
		}
		empty := a.do(http.MethodGet, "/api/licenses", "", a.consumer("initech")...).json()
		if len(empty["data"].([]any)) != 0 || empty["meta"].(map[string]any)["last_page"] != 1.0 {
			t.Errorf("a consumer without licenses sees %v", empty)
		}
		for _, q := range []string{"per_page=0", "per_page=101", "per_page=abc", "per_page=-1"} {
			a.do(http.MethodGet, "/api/licenses?"+q, "", acme...).wantError(http.StatusUnprocessableEntity, "")
		}
		a.do(http.MethodGet, "/api/licenses", "", bearer(a.token("writer", "licenses:write"))...).wantError(http.StatusForbidden, "missing_ability")
	})
}

func TestShowLicense(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme, globex := a.consumer("acme"), a.consumer("globex")
		id := a.create(acme, "acme.test")
		if got := a.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()["id"]; got != id {
			t.Errorf("id = %v", got)
		}
		a.do(http.MethodGet, "/api/licenses/"+id, "", globex...).wantError(http.StatusNotFound, "")
		a.do(http.MethodGet, "/api/licenses/01NOSUCHLICENSE00000000000", "", acme...).wantError(http.StatusNotFound, "")
	})
}

func TestRevokeLicense(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme, globex := a.consumer("acme"), a.consumer("globex")
		id := a.create(acme, "acme.test")

		a.do(http.MethodDelete, "/api/licenses/"+id, "", globex...).wantError(http.StatusNotFound, "")
		a.wantVendorCalls("DELETE", 0)

		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
		a.wantVendorCalls("DELETE", 1)
		if a.vendor.siteCount() != 0 {
			t.Errorf("vendor still holds %d sites", a.vendor.siteCount())
		}
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
		a.wantVendorCalls("DELETE", 1) // the second DELETE calls nobody
		a.wantLicenseStatus(t, acme, id, "revoked", "status = %v, want revoked")
		if n := len(a.do(http.MethodGet, "/api/licenses", "", acme...).json()["data"].([]any)); n != 0 {
			t.Errorf("list shows %d licenses after the revoke, want 0", n)
		}
		// The domain is free again, for anyone: a fresh list + create.
		again := a.create(globex, "acme.test")
		if again == id {
			t.Error("the revoked license came back")
		}
		a.wantVendorCalls("POST", 2)
	})
}

func TestRevokeWhenTheVendorFails(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		id := a.create(acme, "acme.test")
		// The vendor did nothing (it kept answering 429 past the budget): 503,
		// and the license is active again.
		busy := reply{status: 429, body: `{}`, header: map[string]string{"Retry-After": "1"}}
		a.vendor.script("DELETE", busy, busy, busy, busy)
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantError(http.StatusServiceUnavailable, "vendor_unavailable")
		a.wantLicenseStatus(t, acme, id, "active", "status = %v after a failed revoke, want active")
		// The vendor lost the site meanwhile: its 404 counts as done.
		a.vendor.script("DELETE", reply{status: 404, body: `{"message":"Not Found"}`})
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
	})
}

// A revoke whose outcome is unknown (the vendor answered 5xx) is kept: 202
// naming the intent, the license revoking, a retry sends nothing; the
// reconciler deletes the site (a delete is safe to repeat) and the retry
// then gets the 204.
func TestRevokeWithAnUnknownOutcomeIsReconciled(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		id := a.create(acme, "acme.test")
		a.vendor.script("DELETE", reply{status: 503, body: `{}`, commit: true})
		r := a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...)
		r.wantError(http.StatusAccepted, "operation_pending")
		a.wantLicenseStatus(t, acme, id, "revoking", "status = %v after an unknown outcome, want revoking")
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantError(http.StatusAccepted, "operation_pending")
		a.wantVendorCalls("DELETE", 1)

		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want completed", got)
		}
		a.wantLicenseStatus(t, acme, id, "revoked", "status = %v after reconciliation, want revoked")
		replay := a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
		if replay.Header().Get("Idempotent-Replayed") != "true" {
			t.Error("the retry after reconciliation was not the stored 204")
		}
		if a.vendor.siteCount() != 0 {
			t.Errorf("vendor still holds %d sites", a.vendor.siteCount())
		}
		a.wantVendorCalls("DELETE", 2) // the lost one, then the reconciler's (a 404 would do too)
	})
}
