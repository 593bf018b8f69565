package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// TestDriftCaughtByServeAndFixedByTheCommand runs real processes: a site
// deleted at vendor-sim with no webhook sent is caught by serve's drift loop
// (licensor_drift_mismatches{kind="site_gone"} 1 on /metrics), and
// `licensor drift --fix` revokes the license. A second license keeps its
// site, so that the vendor does not list nothing (which drift refuses to
// read as deletions).
func TestDriftCaughtByServeAndFixedByTheCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	r := newFaultRig(t, testdb.New(t, database.SQLite), nil, "DRIFT_INTERVAL=100ms")
	sim, env, token := r.sim, r.env, r.token
	urls, _ := startServes(t, env, 1)
	created := createLicense(t, urls[0], token)
	if code, _, body := send(urls[0]+"/api/licenses", http.MethodPost, token, "", `{"name":"Kept","domain":"kept.test"}`); code != http.StatusCreated {
		t.Fatalf("create kept.test = %d %s", code, body)
	}
	sim.changeSite(created.VendorSiteID, "delete")

	const want = `licensor_drift_mismatches{kind="site_gone"} 1`
	testkit.Eventually(t, 15*time.Second, func() bool {
		_, _, metrics := send(urls[0]+"/metrics", http.MethodGet, "", "", "")
		return strings.Contains(metrics, want)
	}, "/metrics showing %s", want)
	out := runCmd(t, env, "drift", "--fix")
	if !strings.Contains(out, "site_gone\tlicense "+created.ID) || !strings.Contains(out, "fixed") {
		t.Fatalf("drift --fix printed %q", out)
	}
	_, _, shown := send(urls[0]+"/api/licenses/"+created.ID, http.MethodGet, token, "", "")
	if !strings.Contains(shown, `"status":"revoked"`) {
		t.Errorf("after drift --fix the license is %s", shown)
	}
	if out := runCmd(t, env, "drift"); !strings.Contains(out, "0 mismatch(es)") {
		t.Errorf("a second check found %q", out)
	}
}
