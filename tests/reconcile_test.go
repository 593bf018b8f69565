package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

const settle = time.Minute

// reconciler is the reconciler serve runs, as the bootstrap built it.
func (a *app) reconciler() *idempotency.Reconciler { return a.app.Reconciler }

func (a *app) reconcileOnce(r *idempotency.Reconciler) []idempotency.Reconciled {
	a.t.Helper()
	s, err := r.RunOnce(context.Background())
	if err != nil {
		a.t.Fatalf("reconcile: %v", err)
	}
	return s
}

func results(s []idempotency.Reconciled) string {
	var out []string
	for _, x := range s {
		out = append(out, x.Result)
	}
	return strings.Join(out, ",")
}

// The vendor commits the create and the answer is lost: 202, retries send
// nothing, one pass completes the record, the retry replays the 201.
func TestReconcileCreateCommittedAnswerLost(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withClock(testkit.NewClock(time.Now())))
		acme := keyed(a.consumer("acme"), "order-2001")
		a.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusAccepted, "operation_pending")
		calls := a.vendor.count("")
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusAccepted, "operation_pending")
		a.wantVendorCalls("", calls)

		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want completed", got)
		}
		a.wantVendorCalls("POST", 1) // found by the list; never created again
		rec := a.record("order-2001")
		if rec.Status != idempotency.StatusCompleted || *rec.ResponseStatus != http.StatusCreated || *rec.ExternalRef != "site_1" {
			t.Fatalf("record = %s %v %v", rec.Status, *rec.ResponseStatus, *rec.ExternalRef)
		}
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" {
			t.Error("the retry after reconciliation was not a replay")
		}
		id := r.licenseData()["id"].(string)
		if r.Header().Get("Location") != "/api/licenses/"+id || r.Header().Get("Content-Type") != "application/json" {
			t.Errorf("replayed headers = %v", r.Header())
		}
		shown := a.do(http.MethodGet, "/api/licenses/"+id, "", a.consumer("acme")...).wantStatus(http.StatusOK)
		if shown.Body.String() != r.Body.String() {
			t.Errorf("reconciled body differs from the license:\n%s\n%s", r.Body.String(), shown.Body.String())
		}
		if a.vendor.siteCount() != 1 {
			t.Errorf("vendor holds %d sites, want 1", a.vendor.siteCount())
		}
	})
}

// The create never reached the vendor: nothing is created until the record
// is older than the settle time, then one create finishes it.
func TestReconcileCreateNeverReachedTheVendor(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		acme := keyed(a.consumer("acme"), "order-2002")
		a.vendor.script("POST", reply{status: 500, body: `{}`}) // failed without effect; we cannot know that
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusAccepted, "operation_pending")

		r := a.reconciler()
		if got := results(a.reconcileOnce(r)); got != "waiting" {
			t.Fatalf("young record: results %q, want waiting", got)
		}
		a.wantVendorCalls("POST", 1)
		if got := results(a.reconcileOnce(r)); got != "" {
			t.Fatalf("a waiting record was worked again before its settle time: %q", got)
		}
		clk.Advance(settle + time.Second)
		if got := results(a.reconcileOnce(r)); got != "completed" {
			t.Fatalf("settled record: results %q, want completed", got)
		}
		a.wantVendorCalls("POST", 2)
		if a.vendor.siteCount() != 1 {
			t.Errorf("vendor holds %d sites, want 1", a.vendor.siteCount())
		}
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
	})
}

// The vendor stays down: attempts grow with backoff, then the record fails
// and a retry with its key executes again.
func TestReconcileVendorDownThenFailed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withConfig(func(c *config.Config) { c.Reconcile.MaxAttempts = 3 }))
		acme := keyed(a.consumer("acme"), "order-2003")
		a.vendor.script("POST", reply{status: 500, body: `{}`})
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusAccepted, "operation_pending")

		r := a.reconciler()
		down := reply{status: 503, body: `{}`}
		var seen []string
		for range 3 {
			a.vendor.script("GET", down)
			seen = append(seen, results(a.reconcileOnce(r)))
			if got := results(a.reconcileOnce(r)); got != "" {
				t.Fatalf("worked again before its backoff: %q", got)
			}
			clk.Advance(2 * time.Hour) // past any backoff
		}
		if got := strings.Join(seen, " "); got != "retry retry failed" {
			t.Fatalf("results = %q, want retry retry failed", got)
		}
		rec := a.record("order-2003")
		if rec.Status != idempotency.StatusFailed || rec.Attempts != 4 {
			t.Fatalf("record: %s after %d attempts", rec.Status, rec.Attempts)
		}
		if !strings.Contains(a.logs.String(), "an operator should look") {
			t.Error("the failure was not logged for an operator")
		}
		for sample, want := range map[string]string{
			`licensor_reconcile_total{result="failed"}`: "1",
			`licensor_reconcile_total{result="retry"}`:  "2",
		} {
			if got := a.metric(sample); got != sample+" "+want {
				t.Errorf("got %q, want %s", got, want)
			}
		}
		r2 := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		if r2.Header().Get("Idempotent-Replayed") != "" {
			t.Error("a failed record was replayed")
		}
	})
}

// A request without a key whose outcome is unknown is kept too, and its
// license appears once it is settled.
func TestReconcileRequestWithoutKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		a.vendor.script("POST", reply{status: 504, body: `{}`, commit: true})
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, append(acme, "X-Request-Id", "req-77")...)
		r.wantError(http.StatusAccepted, "operation_pending")
		rec := a.record("auto:req-77")
		if rec == nil || rec.Status != idempotency.StatusPending {
			t.Fatalf("no pending auto: record: %+v", rec)
		}
		if n := len(a.do(http.MethodGet, "/api/licenses", "", acme...).json()["data"].([]any)); n != 0 {
			t.Fatalf("%d licenses before reconciliation", n)
		}
		a.reconcileOnce(a.reconciler())
		list := a.do(http.MethodGet, "/api/licenses", "", acme...).json()["data"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["domain"] != "acme.test" {
			t.Errorf("after reconciliation the list is %v", list)
		}
	})
}

// Two reconcilers (two replicas) work the same pending records at once:
// every intent ends with one create, never two.
func TestTwoReconcilersNeverDoubleCreate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		// A second replica: its own application on the same database and vendor.
		replica, err := console.Bootstrap(context.Background(), a.app.Config, a.app.Log, console.Overrides{DB: db.Gorm, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		acme := a.consumer("acme")
		const n = 12
		for i := range n {
			a.vendor.script("POST", reply{status: 500, body: `{}`})
			a.do(http.MethodPost, "/api/licenses", fmt.Sprintf(`{"name":"S","domain":"shop%d.test"}`, i), keyed(acme, fmt.Sprint("k-", i))...).
				wantError(http.StatusAccepted, "operation_pending")
		}
		clk.Advance(settle + time.Second) // all old enough to create
		var wg sync.WaitGroup
		worked := make([]int, 2)
		for i, r := range []*idempotency.Reconciler{a.reconciler(), replica.Reconciler} {
			wg.Go(func() { worked[i] = len(a.reconcileOnce(r)) })
		}
		wg.Wait()
		if worked[0]+worked[1] != n {
			t.Errorf("reconcilers worked %v records, want %d in all", worked, n)
		}
		a.wantVendorCalls("POST", 2*n) // the n lost first attempts, then exactly one create each
		if a.vendor.siteCount() != n {
			t.Errorf("vendor holds %d sites, want %d", a.vendor.siteCount(), n)
		}
		var completed int64
		a.db.Gorm.Model(&idempotency.Record{}).Where("status = ?", idempotency.StatusCompleted).Count(&completed)
		if completed != n {
			t.Errorf("%d completed records, want %d", completed, n)
		}
	})
}

func TestPruneExpiredRecordsInBatches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		now := dbtime.Stamp(clk.Now())
		mk := func(key, status string, expires time.Time) idempotency.Record {
			return idempotency.Record{ConsumerID: "c1", Operation: "licenses.store", Key: key, RequestHash: "h",
				Status: status, CreatedAt: now, UpdatedAt: now, ExpiresAt: expires}
		}
		var recs []idempotency.Record
		for i := range 10000 {
			recs = append(recs, mk(fmt.Sprint("old-", i), idempotency.StatusCompleted, now.Add(-time.Minute)))
		}
		for i := range 10 {
			recs = append(recs, mk(fmt.Sprint("live-", i), idempotency.StatusCompleted, now.Add(time.Hour)))
		}
		recs = append(recs, mk("old-but-pending", idempotency.StatusPending, now.Add(-time.Minute)))
		if err := db.Gorm.CreateInBatches(recs, 1000).Error; err != nil {
			t.Fatal(err)
		}
		n, _, err := a.app.Pruner.RunOnce(ctx)
		if err != nil || n != 10000 {
			t.Fatalf("pruned %d, %v; want 10000", n, err)
		}
		var left []string
		db.Gorm.Model(&idempotency.Record{}).Order("idempotency_key").Pluck("idempotency_key", &left)
		if len(left) != 11 || left[0] != "live-0" || left[10] != "old-but-pending" {
			t.Errorf("left = %v, want the 10 live records and the pending one", left)
		}
	})
}

// A process died mid-create and no retry came: once its lease has been over
// for a whole lease more, the reconciler finishes the intent.
func TestReconcileAbandonedProcessingRecord(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.consumer("acme")
		a.vendor.addSite("Acme", "acme.test") // the dead owner's create went through
		a.plantRecord("acme", "order-2004", acmeBody, "processing", -90*time.Second)
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("results = %q, want the abandoned intent completed", got)
		}
		a.wantVendorCalls("POST", 0)
		if rec := a.record("order-2004"); rec.Status != idempotency.StatusCompleted {
			t.Errorf("record is %s", rec.Status)
		}
	})
}

// A record whose owner may still be alive (lease just over) is left to the
// client's retry, which takes it over.
func TestReconcileLeavesRecentlyLapsedLeases(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	a.consumer("acme")
	a.plantRecord("acme", "order-2005", acmeBody, "processing", -time.Second)
	if got := results(a.reconcileOnce(a.reconciler())); got != "" {
		t.Fatalf("results = %q, want nothing claimed", got)
	}
}

// The outbox rule: an intent that cannot be put on the record is never sent
// to the vendor, keyed or not. A store that is unavailable for now (here: a
// full table on MySQL) is a 503 to retry; a store that is broken (here: its
// table gone) is a 500 that shows nothing of the database.
func TestIntentThatCannotBeRecordedIsNeverSent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		if db.Dialect == database.MySQL {
			full := "CREATE TRIGGER table_full BEFORE INSERT ON idempotency_keys FOR EACH ROW SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1114, MESSAGE_TEXT = 'The table is full'"
			if err := db.Gorm.Exec(full).Error; err != nil {
				t.Fatal(err)
			}
			a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusServiceUnavailable, "temporarily_unavailable")
			a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-2010")...).wantError(http.StatusServiceUnavailable, "temporarily_unavailable")
		}
		if err := db.Gorm.Exec("DROP TABLE idempotency_keys").Error; err != nil { // the store is broken
			t.Fatal(err)
		}
		for _, r := range []*response{
			a.do(http.MethodPost, "/api/licenses", acmeBody, acme...),
			a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-2011")...),
		} {
			r.wantStatus(http.StatusInternalServerError)
			if strings.Contains(r.Body.String(), "idempotency_keys") {
				t.Errorf("the answer shows the database's words: %s", r.Body.String())
			}
		}
		a.wantVendorCalls("", 0)
	})
}

// A 202 promises the intent is kept: when the vendor's answer is lost and
// the pending state cannot be written, the client gets a 503 instead, the
// record stays processing, and the intent still converges on the one site:
// through the keyed retry that takes it over, or through the reconciler for
// a keyless one.
func TestPendingThatCannotBeKeptIs503AndStillConverges(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk))
		acme := a.consumer("acme")
		trigger := map[string]string{
			"sqlite": "CREATE TRIGGER pending_fails BEFORE UPDATE ON idempotency_keys WHEN NEW.status = 'pending' BEGIN SELECT RAISE(ABORT, 'disk full'); END",
			"mysql":  "CREATE TRIGGER pending_fails BEFORE UPDATE ON idempotency_keys FOR EACH ROW BEGIN IF NEW.status = 'pending' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'disk full'; END IF; END",
		}[db.Dialect]
		if err := db.Gorm.Exec(trigger).Error; err != nil {
			t.Fatal(err)
		}
		lost := reply{status: 500, body: `{}`, commit: true}
		a.vendor.script("POST", lost, lost)
		keyedReq := keyed(acme, "order-2011")
		a.do(http.MethodPost, "/api/licenses", acmeBody, keyedReq...).wantError(http.StatusServiceUnavailable, "temporarily_unavailable")
		a.do(http.MethodPost, "/api/licenses", `{"name":"B","domain":"b.test"}`, acme...).wantError(http.StatusServiceUnavailable, "temporarily_unavailable")
		if rec := a.record("order-2011"); rec == nil || rec.Status != "processing" {
			t.Fatalf("the keyed record is %+v, want it left processing", rec)
		}
		if err := db.Gorm.Exec("DROP TRIGGER pending_fails").Error; err != nil {
			t.Fatal(err)
		}

		clk.Advance(2*time.Minute + time.Second) // both leases over, and over for a lease more
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, keyedReq...).wantStatus(http.StatusCreated)
		if r.licenseData()["vendor_site_id"] != "site_1" {
			t.Errorf("the keyed retry did not converge on the committed site: %s", r.Body.String())
		}
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want the keyless intent completed", got)
		}
		a.wantVendorCalls("POST", 2) // the two lost creates; nothing was created twice
		if a.vendor.siteCount() != 2 || a.licenseRows() != 2 {
			t.Errorf("vendor holds %d sites and we %d licenses, want 2 and 2", a.vendor.siteCount(), a.licenseRows())
		}
	})
}

// The vendor created the site but the license row could not be written: the
// intent is pending, not released, and reconciliation records it.
func TestCreateRecordedFailureAfterVendorSuccessIsPending(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := keyed(a.consumer("acme"), "order-2006")
		trigger := map[string]string{
			"sqlite": "CREATE TRIGGER licenses_fail BEFORE INSERT ON licenses BEGIN SELECT RAISE(ABORT, 'disk full'); END",
			"mysql":  "CREATE TRIGGER licenses_fail BEFORE INSERT ON licenses FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'disk full'",
		}[db.Dialect]
		if err := db.Gorm.Exec(trigger).Error; err != nil {
			t.Fatal(err)
		}
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...)
		r.wantError(http.StatusAccepted, "operation_pending")
		if strings.Contains(r.Body.String(), "disk full") {
			t.Error("the database's error reached the client")
		}
		if err := db.Gorm.Exec("DROP TRIGGER licenses_fail").Error; err != nil {
			t.Fatal(err)
		}
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("results = %q", got)
		}
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated)
		a.wantVendorCalls("POST", 1)
	})
}

// The loops serve runs: the reconciler settles a pending intent on its own,
// the pruner deletes an expired record on its own, and both stop with their
// context.
func TestBackgroundLoopsWorkAndStop(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withConfig(func(c *config.Config) { c.Reconcile.Interval, c.PruneEvery = 10*time.Millisecond, 10*time.Millisecond }))
		acme := keyed(a.consumer("acme"), "order-2007")
		a.vendor.script("POST", reply{status: 500, body: `{}`, commit: true})
		a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantError(http.StatusAccepted, "operation_pending")
		past := time.Now().UTC().Add(-time.Hour)
		old := idempotency.Record{ConsumerID: "c", Operation: "licenses.store", Key: "old", RequestHash: "h",
			Status: idempotency.StatusCompleted, CreatedAt: past, UpdatedAt: past, ExpiresAt: past}
		if err := db.Gorm.Create(&old).Error; err != nil {
			t.Fatal(err)
		}

		ctx, stop := context.WithCancel(context.Background())
		var loops sync.WaitGroup
		loops.Go(func() { a.app.Reconciler.Run(ctx) })
		loops.Go(func() { a.app.Pruner.Run(ctx) })

		testkit.Poll(10*time.Second, func() bool {
			rec := a.record("order-2007")
			return rec.Status == idempotency.StatusCompleted && a.record("old") == nil
		})
		stop()
		loops.Wait() // both loops return once their context ends
		if rec := a.record("order-2007"); rec.Status != idempotency.StatusCompleted {
			t.Errorf("the reconciler loop left the intent %s", rec.Status)
		}
		if a.record("old") != nil {
			t.Error("the pruner loop left the expired record")
		}
	})
}
