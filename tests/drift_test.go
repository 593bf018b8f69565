package tests

import (
	"context"
	"maps"
	"net/http"
	"testing"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A change the vendor made whose webhook never came is caught by the drift
// check: a site gone, a site suspended, a key rotated, and a site no license
// holds; --fix brings each license in line through the webhook's code, and
// the next check finds only the orphan (which it never deletes). Both
// databases.
func TestDriftFoundAndFixed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		ids := map[string]string{}
		for _, d := range []string{"gone.test", "paused.test", "rekeyed.test", "fine.test"} {
			ids[d] = a.do(http.MethodPost, "/api/licenses", `{"name":"A","domain":"`+d+`"}`, acme...).wantStatus(http.StatusCreated).licenseData()["id"].(string)
		}
		a.vendor.mu.Lock()
		delete(a.vendor.sites, "gone.test")
		s := a.vendor.sites["paused.test"]
		s.Status = "suspended"
		a.vendor.sites["paused.test"] = s
		s = a.vendor.sites["rekeyed.test"]
		s.LicenseKey = "LK-new"
		a.vendor.sites["rekeyed.test"] = s
		a.vendor.mu.Unlock()
		a.vendor.addSite("Orphan", "orphan.test")

		lister, ok := a.app.Vendor.(licenses.SiteLister)
		if !ok {
			t.Fatal("the http driver lists no sites")
		}
		check := func(fix bool) map[string]int {
			t.Helper()
			r, err := a.app.Licenses.Drift(context.Background(), lister, fix)
			if err != nil {
				t.Fatal(err)
			}
			if r.Sites != 4 {
				t.Errorf("read %d vendor sites, want 4", r.Sites)
			}
			return r.Counts()
		}
		want := map[string]int{licenses.DriftSiteGone: 1, licenses.DriftStatus: 1, licenses.DriftKey: 1, licenses.DriftOrphanSite: 1, licenses.DriftDomain: 0}
		if got := check(false); !maps.Equal(got, want) {
			t.Errorf("drift = %v, want %v", got, want)
		}
		if got := check(false); !maps.Equal(got, want) {
			t.Errorf("a check without --fix changed something: %v", got)
		}
		check(true)
		status := func(d string) map[string]any {
			return a.do(http.MethodGet, "/api/licenses/"+ids[d], "", acme...).wantStatus(http.StatusOK).licenseData()
		}
		if got := status("gone.test")["status"]; got != "revoked" {
			t.Errorf("gone.test = %v, want revoked", got)
		}
		if got := status("paused.test")["status"]; got != "suspended" {
			t.Errorf("paused.test = %v, want suspended", got)
		}
		if got := status("rekeyed.test")["license_key"]; got != "LK-new" {
			t.Errorf("rekeyed.test key = %v, want LK-new", got)
		}
		if got := status("fine.test")["status"]; got != "active" {
			t.Errorf("fine.test = %v, want active", got)
		}
		want = map[string]int{licenses.DriftSiteGone: 0, licenses.DriftStatus: 0, licenses.DriftKey: 0, licenses.DriftOrphanSite: 1, licenses.DriftDomain: 0}
		if got := check(false); !maps.Equal(got, want) {
			t.Errorf("after --fix: %v, want only the orphan", got)
		}
		if got := a.licenseEventNames(acme, ids["paused.test"]); len(got) != 2 || got[1] != "suspended by vendor" {
			t.Errorf("paused.test events = %v", got)
		}
	})
}
