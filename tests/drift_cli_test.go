package tests

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// driftCLI runs `licensor drift args…` in-process on the app's database,
// against the app's test vendor (VENDOR_DRIVER=http) unless vars say
// otherwise; it returns stdout, stderr and the command's error.
func (a *app) drift(vars map[string]string, args ...string) (string, string, error) {
	a.t.Helper()
	env := map[string]string{"APP_ENV": config.EnvTesting, "APP_KEY": config.EncodeKey(testKey),
		"VENDOR_DRIVER": "http", "VENDOR_URL": a.vendor.srv.URL, "VENDOR_TOKEN": "vendor-secret-token",
		"DRIFT_INTERVAL": "0"}
	if a.db.Dialect == database.MySQL {
		env["DB_CONNECTION"], env["DB_URL"] = "mysql", a.db.Config.URL
	} else {
		env["DB_DATABASE"] = a.db.Config.Database
	}
	for k, v := range vars {
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	var stdout, stderr bytes.Buffer
	err := console.Run(context.Background(), append([]string{"drift"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// createLicenses creates a license for each domain and returns their ids.
func (a *app) createLicenses(domains ...string) map[string]string {
	a.t.Helper()
	acme := a.consumer("acme")
	ids := map[string]string{}
	for _, d := range domains {
		ids[d] = a.do(http.MethodPost, "/api/licenses", `{"name":"A","domain":"`+d+`"}`, acme...).wantStatus(http.StatusCreated).licenseData()["id"].(string)
	}
	return ids
}

// `licensor drift --fix` with the default fake vendor (whose sites live in
// the process that made them: a new process has none) refuses, exit 1,
// saying why, and revokes nothing; `licensor drift` against it reports the
// empty vendor as suspect, never as deletions, exit 1.
func TestDriftFixRefusesTheFakeVendor(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		ids := a.createLicenses("one.test", "two.test", "three.test")
		fake := map[string]string{"VENDOR_DRIVER": "", "VENDOR_URL": "", "VENDOR_TOKEN": ""} // the default: fake
		for _, args := range [][]string{{"--fix"}, {"--fix", "--force"}} {
			out, _, err := a.drift(fake, args...)
			if console.ExitCode(err) != 1 || !strings.Contains(err.Error(), "refused with VENDOR_DRIVER=fake") {
				t.Errorf("drift %q against the fake = %v (exit %d), want exit 1, refused", args, err, console.ExitCode(err))
			}
			if strings.Contains(out, "site_gone") {
				t.Errorf("drift %q printed %q", args, out)
			}
		}
		out, _, err := a.drift(fake)
		if console.ExitCode(err) != 1 || !strings.Contains(err.Error(), "the vendor lists no sites: refusing to treat 3 license(s) as deleted") {
			t.Errorf("drift against the fake = %v (exit %d), want exit 1, the empty vendor suspect", err, console.ExitCode(err))
		}
		if strings.Contains(out, "site_gone") {
			t.Errorf("drift printed deletions: %q", out)
		}
		for d, id := range ids {
			a.wantLicenseStatus(t, a.consumer("acme"), id, "active", d+" is %v, want active")
		}
	})
}

// A vendor that lists no site at all while licenses are in force is
// refused, even with --force: exit 1, no license revoked.
func TestDriftRefusesAnEmptyVendorEvenForced(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		ids := a.createLicenses("one.test", "two.test")
		a.vendor.mu.Lock()
		clear(a.vendor.sites)
		a.vendor.mu.Unlock()
		out, _, err := a.drift(nil, "--fix", "--force")
		if console.ExitCode(err) != 1 || !strings.Contains(err.Error(), "the vendor lists no sites: refusing to treat 2 license(s) as deleted") {
			t.Errorf("drift --fix --force = %v (exit %d)", err, console.ExitCode(err))
		}
		if strings.Contains(out, "site_gone") || strings.Contains(out, "fixed") {
			t.Errorf("printed %q", out)
		}
		for d, id := range ids {
			a.wantLicenseStatus(t, a.consumer("acme"), id, "active", d+" is %v, want active")
		}
	})
}

// More revocations than DRIFT_MAX_FIX: `drift --fix` applies nothing,
// prints what it would do, and exits 1; --force applies them (exit 0). A
// plain `drift` shows what --fix would change and exits 1 while
// mismatches remain, 0 once clean.
func TestDriftFixBoundAndExitCodes(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		ids := a.createLicenses("gone1.test", "gone2.test", "gone3.test", "paused.test", "kept.test")
		if out, _, err := a.drift(nil); err != nil || !strings.Contains(out, "0 mismatch(es)") {
			t.Fatalf("a clean drift = %q, %v; want exit 0", out, err)
		}
		a.vendor.mu.Lock()
		for _, d := range []string{"gone1.test", "gone2.test", "gone3.test"} {
			delete(a.vendor.sites, d)
		}
		s := a.vendor.sites["paused.test"]
		s.Status = "suspended"
		a.vendor.sites["paused.test"] = s
		a.vendor.mu.Unlock()

		out, _, err := a.drift(nil)
		if console.ExitCode(err) != 1 || !strings.Contains(err.Error(), "4 mismatch(es) not fixed") {
			t.Errorf("drift with mismatches = %v (exit %d), want exit 1", err, console.ExitCode(err))
		}
		if strings.Count(out, "\twould revoke\n") != 3 || !strings.Contains(out, "status_differs\tlicense "+ids["paused.test"]+"\t") ||
			!strings.Contains(out, "\twould suspend\n") {
			t.Errorf("drift printed %q, want what --fix would change", out)
		}

		max := map[string]string{"DRIFT_MAX_FIX": "2"}
		out, _, err = a.drift(max, "--fix")
		if console.ExitCode(err) != 1 || !strings.Contains(err.Error(), "3 fix(es) would revoke a license or replace its key, more than the bound of 2; nothing applied") ||
			!strings.Contains(err.Error(), "--force") {
			t.Errorf("drift --fix over the bound = %v (exit %d)", err, console.ExitCode(err))
		}
		if strings.Count(out, "\twould revoke\n") != 3 {
			t.Errorf("drift --fix over the bound printed %q", out)
		}
		for d, id := range ids {
			a.wantLicenseStatus(t, a.consumer("acme"), id, "active", d+" is %v after a refused fix, want active")
		}

		out, _, err = a.drift(max, "--fix", "--force")
		if err != nil || strings.Count(out, "\tfixed\n") != 4 || !strings.Contains(out, "4 mismatch(es), 4 fixed") {
			t.Errorf("drift --fix --force = %q, %v; want 4 fixed, exit 0", out, err)
		}
		for d, want := range map[string]string{"gone1.test": "revoked", "paused.test": "suspended", "kept.test": "active"} {
			a.wantLicenseStatus(t, a.consumer("acme"), ids[d], want, "after the forced fix: "+d+" is %v, want "+want)
		}
		if out, _, err := a.drift(nil); err != nil || !strings.Contains(out, "0 mismatch(es)") {
			t.Errorf("drift after the fix = %q, %v; want clean, exit 0", out, err)
		}

		// An orphan site is reported only: it remains, and so does exit 1.
		a.vendor.addSite("Orphan", "orphan.test")
		out, _, err = a.drift(nil, "--fix")
		if console.ExitCode(err) != 1 || !strings.Contains(out, "orphan_site\tlicense -\t") || !strings.Contains(out, "\treported only\n") {
			t.Errorf("drift --fix with an orphan = %q, %v (exit %d), want exit 1", out, err, console.ExitCode(err))
		}
		if _, _, err := a.drift(nil, "--force"); console.ExitCode(err) != 2 {
			t.Errorf("drift --force without --fix = %v, want a usage error", err)
		}
	})
}

// The vendor gave a license's site id to another domain: drift reports
// domain_differs, --fix leaves the license alone (exit 1), and the
// mismatch is counted in licensor_vendor_site_mismatches_total{source="drift"}.
func TestDriftNeverAppliesASiteOfAnotherDomain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		ids := a.createLicenses("old.test")
		a.vendor.mu.Lock()
		s := a.vendor.sites["old.test"]
		delete(a.vendor.sites, "old.test")
		s.Domain, s.Status = "new.test", "suspended"
		a.vendor.sites["new.test"] = s
		a.vendor.mu.Unlock()

		out, _, err := a.drift(nil, "--fix", "--force")
		if console.ExitCode(err) != 1 || !strings.Contains(out, "domain_differs\tlicense "+ids["old.test"]+"\tsite "+s.ID+"\told.test\treported only\n") {
			t.Errorf("drift --fix = %q, %v (exit %d)", out, err, console.ExitCode(err))
		}
		a.wantLicenseStatus(t, a.consumer("acme"), ids["old.test"], "active", "the license is %v, want active")
		// The application's service counts what it saw, and logs it.
		r, err := a.app.Licenses.Drift(context.Background(), a.app.Vendor.(licenses.SiteLister), true)
		if err != nil || r.Counts()[licenses.DriftDomain] != 1 {
			t.Fatalf("drift = %+v, %v", r, err)
		}
		const want = `licensor_vendor_site_mismatches_total{source="drift"} 1`
		if body := a.do(http.MethodGet, "/metrics", "").wantStatus(http.StatusOK).Body.String(); !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
		if logs := a.logs.String(); !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, `"site_id":"`+s.ID+`"`) ||
			!strings.Contains(logs, `"source":"drift"`) || strings.Contains(logs, s.LicenseKey) {
			t.Errorf("logs = %s", logs)
		}
	})
}
