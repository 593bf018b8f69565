package tests

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// An operation that could never finish a pending intent of its own stops
// the start, naming it: found by the bootstrap, not by the reconciler an
// hour after the first intent of it.
func TestAnOperationWithoutResumeStopsTheStart(t *testing.T) {
	db := testdb.New(t, "sqlite")
	v := newVendor(t)
	cfg := testConfig(v.srv.URL)
	noResume := idempotency.Operation[struct{}]{
		Name: "jobs.sync",
		Run: func(context.Context, *idempotency.Execution, struct{}) (idempotency.Response, error) {
			return idempotency.Response{Status: http.StatusOK}, nil
		},
	}
	a, err := console.Bootstrap(context.Background(), cfg, console.NewLogger(cfg, &testkit.Buffer{}),
		console.Overrides{DB: db.Gorm, Read: db.Read, Operations: []idempotency.AnyOperation{noResume}})
	if err == nil {
		a.Close()
		t.Fatal("the application started with an operation it cannot resume")
	}
	if !strings.Contains(err.Error(), `"jobs.sync" has no Resume`) {
		t.Errorf("error = %v, want it to name the operation and what it lacks", err)
	}
}

// The one list of operations names the metrics' labels: every operation
// the routes and the reconciler know is counted from start-up.
func TestEveryOperationIsCountedFromStartUp(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	names := a.app.Guard.Operations().Names()
	if len(names) < 3 {
		t.Fatalf("%d operations, want at least licenses.store, licenses.destroy and webhooks.vendor", len(names))
	}
	for _, name := range names {
		sample := `licensor_idempotency_requests_total{operation="` + name + `",outcome="executed"}`
		if got := a.metric(sample); got != sample+" 0" {
			t.Errorf("%s: got %q, want it at 0", sample, got)
		}
	}
}

// A vendor event whose owner died mid-apply (its record processing, the
// lease long over) is finished by the reconciler from the record alone,
// through the operation's Resume: applied once, answered as a delivery is.
func TestAbandonedVendorEventIsResumed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		body := vendorEventBody("evt_dead", "site.suspended", time.Now().Add(-time.Minute), lic["vendor_site_id"].(string), "")
		now := dbtime.Now()
		lease := now.Add(-2 * time.Minute)
		intent, fingerprint := eventIntent(t, "webhooks.vendor", body)
		rec := idempotency.Record{ConsumerID: "vendor", Operation: "webhooks.vendor", Key: "evt_dead",
			RequestHash: fingerprint, RequestBody: intent, Status: "processing", LockedUntil: &lease,
			Attempts: 1, CreatedAt: now.Add(-3 * time.Minute), UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := db.Gorm.Create(&rec).Error; err != nil {
			t.Fatal(err)
		}
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("results = %q, want the abandoned event applied", got)
		}
		id := lic["id"].(string)
		if got := a.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()["status"]; got != "suspended" {
			t.Errorf("status = %v, want suspended", got)
		}
		// The vendor's redelivery is the stored answer; the event is not applied twice.
		a.webhook(body, signature(time.Now(), body, webhookSecret)).wantStatus(http.StatusOK)
		if n := countOf(a.licenseEventNames(acme, id), "suspended by vendor"); n != 1 {
			t.Errorf("%d suspended events, want 1", n)
		}
	})
}
