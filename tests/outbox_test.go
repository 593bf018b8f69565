package tests

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// dies sends a request whose owner "dies" mid-call: the vendor commits the
// write and then holds its answer for as long as the test runs, so the
// request never settles. From the database's side that is exactly what a
// process killed at that instant leaves behind. The held request is released
// (with an answer that says nothing) when the test ends, and waited for.
func (a *app) dies(method, path, body string, headers ...string) {
	a.t.Helper()
	held, entered := make(chan struct{}), make(chan struct{})
	a.vendor.script(method, reply{status: 502, body: `{}`, commit: true, hold: held, entered: entered})
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.e.ServeHTTP(httptest.NewRecorder(), req) })
	<-entered
	a.t.Cleanup(func() { close(held); wg.Wait() })
}

// abandon moves the app's clock past the lease of a dead owner and the lease
// more after which the reconciler may claim its record.
func (a *app) abandon(clk *testkit.Clock) { clk.Advance(2*time.Minute + time.Second) }

// wantNothingUnsettled fails when a record is still processing or pending.
func (a *app) wantNothingUnsettled() {
	a.t.Helper()
	var n int64
	a.db.Gorm.Model(&idempotency.Record{}).Where("status IN ?", []string{"processing", idempotency.StatusPending}).Count(&n)
	if n != 0 {
		a.t.Errorf("%d records still processing or pending", n)
	}
}

// activeLicenses returns the domains of the active licenses.
func (a *app) activeLicenses() []string {
	a.t.Helper()
	var domains []string
	a.db.Gorm.Model(&licenses.License{}).Where("status = ?", licenses.StatusActive).Order("domain").Pluck("domain", &domains)
	return domains
}

// A create whose process dies while the vendor is creating the site, keyed
// or not, is on the record; the reconciler finishes it: one site, one
// license, and the keyed retry then replays the 201.
func TestCreateKilledMidCallIsReconciled(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		acme := a.consumer("acme")
		a.dies(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-4001")...)
		a.dies(http.MethodPost, "/api/licenses", `{"name":"B","domain":"b.test"}`, append(acme, "X-Request-Id", "req-4002")...)
		for _, key := range []string{"order-4001", "auto:req-4002"} {
			if rec := a.record(key); rec == nil || rec.Status != "processing" {
				t.Fatalf("record %s = %+v: the intent was not on the record before the vendor call", key, rec)
			}
		}
		if a.vendor.siteCount() != 2 || a.licenseRows() != 0 {
			t.Fatalf("before: %d sites, %d licenses; want the 2 committed sites and no license", a.vendor.siteCount(), a.licenseRows())
		}

		a.abandon(clk)
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed,completed" {
			t.Fatalf("reconcile results = %q, want both completed", got)
		}
		a.wantVendorCalls("POST", 2) // adopted, never created again
		if got := strings.Join(a.activeLicenses(), ","); got != "acme.test,b.test" || a.vendor.siteCount() != 2 {
			t.Errorf("licenses %q and %d sites, want one each for acme.test and b.test", got, a.vendor.siteCount())
		}
		a.wantNothingUnsettled()
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-4001")...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" {
			t.Error("the keyed retry was not a replay")
		}
	})
}

// A revoke whose process dies after the vendor deleted the site is on the
// record (the license revoking, the intent processing); the reconciler
// finishes it, and the vendor's 404 for a site already gone counts as done.
func TestRevokeKilledMidCallIsReconciled(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		acme := a.consumer("acme")
		id := a.create(acme, "acme.test")
		a.dies(http.MethodDelete, "/api/licenses/"+id, "", acme...)
		a.wantLicenseStatus(t, acme, id, licenses.StatusRevoking, "status = %v mid-revoke, want revoking")
		if a.vendor.siteCount() != 0 {
			t.Fatalf("the vendor still holds %d sites", a.vendor.siteCount())
		}

		a.abandon(clk)
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want completed", got)
		}
		a.wantLicenseStatus(t, acme, id, licenses.StatusRevoked, "status = %v after reconciliation, want revoked")
		a.wantNothingUnsettled()
		if len(a.activeLicenses()) != 0 || a.vendor.siteCount() != 0 {
			t.Errorf("active licenses %v and %d sites, want none", a.activeLicenses(), a.vendor.siteCount())
		}
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
		a.wantVendorCalls("DELETE", 2) // the lost one, and the reconciler's (a 404)
		// The domain is free again.
		a.create(acme, "acme.test")
	})
}

// The vendor deleted the site but the revoke could not be recorded: the
// intent is kept (202), never reopened as active, and the reconciler
// records it (the vendor's 404 counts as done).
func TestRevokeRecordedFailureAfterVendorDeleteIsPending(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		id := a.create(acme, "acme.test")
		trigger := map[string]string{
			"sqlite": "CREATE TRIGGER revoke_fails BEFORE UPDATE ON licenses WHEN NEW.status = 'revoked' BEGIN SELECT RAISE(ABORT, 'disk full'); END",
			"mysql":  "CREATE TRIGGER revoke_fails BEFORE UPDATE ON licenses FOR EACH ROW BEGIN IF NEW.status = 'revoked' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'disk full'; END IF; END",
		}[db.Dialect]
		if err := db.Gorm.Exec(trigger).Error; err != nil {
			t.Fatal(err)
		}
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).pendingOperation()
		if a.vendor.siteCount() != 0 {
			t.Fatal("the vendor still holds the site")
		}
		a.wantLicenseStatus(t, acme, id, licenses.StatusRevoking, "status = %v, want revoking (never active again once the site is gone)")
		if err := db.Gorm.Exec("DROP TRIGGER revoke_fails").Error; err != nil {
			t.Fatal(err)
		}
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want completed", got)
		}
		a.wantLicenseStatus(t, acme, id, licenses.StatusRevoked, "status = %v, want revoked")
	})
}

// A revoke an earlier attempt left revoking (its outcome unknown) is never
// reopened by a later attempt that fails without effect: that attempt cannot
// know the earlier one did not reach the vendor, so the intent stays kept.
func TestRevokeNeverReopensWhatAnEarlierAttemptMayHaveDone(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		acme := a.consumer("acme")
		id := a.create(acme, "acme.test")
		a.vendor.script("DELETE", reply{status: 503, body: `{}`, commit: true}) // done, answer lost
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).pendingOperation()
		busy := reply{status: 429, body: `{}`, header: map[string]string{"Retry-After": "1"}}
		a.vendor.script("DELETE", busy, busy, busy, busy)
		if got := results(a.reconcileOnce(a.reconciler())); got != "failed" {
			t.Fatalf("reconcile = %q, want failed", got)
		}
		a.vendor.script("DELETE", busy, busy, busy, busy)
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).pendingOperation() // the retry takes the failed intent over
		a.wantLicenseStatus(t, acme, id, licenses.StatusRevoking, "status = %v, want still revoking")
	})
}

// An expired intent that failed is not replaced by another request under
// its key: it may have had an effect nobody else knows of.
func TestExpiredFailedIntentIsNotReplacedByAnotherRequest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 1 }))
		acme := a.consumer("acme")
		id := a.failIntent(acme, "order-4010", acmeBody, clk)
		clk.Advance(25 * time.Hour) // past IDEMPOTENCY_TTL (and the test token's lifetime)
		acme = a.consumer("acme")
		a.do(http.MethodPost, "/api/licenses", `{"name":"Other","domain":"other.test"}`, keyed(acme, "order-4010")...).
			wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
		a.do(http.MethodGet, "/api/operations/"+id, "", acme...).wantStatus(http.StatusOK)
	})
}
