package console

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/activity"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// activityApp is the application as Bootstrap builds it, on the test's
// database and clock, and the fake vendor.
func activityApp(t *testing.T, db *testdb.DB, clk *testkit.Clock) *App {
	t.Helper()
	t.Chdir(t.TempDir())
	cfg, err := config.Load(getenvOf(map[string]string{"APP_ENV": "testing"}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Bootstrap(context.Background(), cfg, NewLogger(cfg, &bytes.Buffer{}),
		Overrides{DB: db.Gorm, Read: db.Read, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('c1', 'c1', ?, ?)", now, now).Error; err != nil {
		t.Fatal(err)
	}
	return a
}

// The Base's pruner deletes the activity hours older than 7 days, and
// Close flushes the counts the Base holds.
func TestBasePrunesAndFlushesActivity(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		now := time.Date(2026, 12, 8, 10, 30, 0, 0, time.UTC)
		clk := testkit.NewClock(now.Add(-activityTTL - time.Hour)) // a row 7 days and an hour old
		a := activityApp(t, db, clk)
		if err := a.Activity.Set(ctx, activity.DriftMismatches, 3); err != nil {
			t.Fatal(err)
		}
		clk.Set(now.Add(-activityTTL + time.Hour)) // and one kept
		if err := a.Activity.Set(ctx, activity.DriftMismatches, 2); err != nil {
			t.Fatal(err)
		}
		clk.Set(now)
		_, others, err := a.Pruner.RunOnceAll(ctx)
		if err != nil || others[prunedActivity] != 1 {
			t.Fatalf("prune = %v, %v; want the one activity hour older than 7 days", others, err)
		}
		createLicense(t, a, "a.test")
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		series, err := activity.New(activity.Config{DB: db.Gorm, Now: clk.Now}).Series(ctx, []string{activity.Creates, activity.DriftMismatches}, 7*24)
		if err != nil {
			t.Fatal(err)
		}
		var created, gauges int64
		for _, p := range series[activity.Creates] {
			created += p.Count
		}
		for _, p := range series[activity.DriftMismatches] {
			gauges += p.Count
		}
		if created != 1 || gauges != 2 {
			t.Errorf("after Close the table holds %d creates and drift rows summing to %d; want the create flushed, and only the kept gauge (2)", created, gauges)
		}
	})
}

// The drift loop writes the last check's mismatches, in all and by kind,
// for the console's gauge.
func TestDriftLoopRecordsTheMismatches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		clk := testkit.NewClock(time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC))
		a := activityApp(t, db, clk)
		t.Cleanup(func() { _ = a.Close() })
		gone := createLicense(t, a, "gone.test")
		createLicense(t, a, "kept.test")
		if err := a.Vendor.DeleteSite(ctx, gone.VendorSiteID); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second) // a check compares the licenses made before it began
		loopCtx, stop := context.WithCancel(ctx)
		var loop sync.WaitGroup
		loop.Go(func() { runDrift(loopCtx, a, a.Vendor.(licenses.SiteLister), time.Millisecond, a.Log) })
		defer func() { stop(); loop.Wait() }()
		latest := func(metric string) int64 {
			v, _, ok, err := a.Activity.Latest(ctx, metric)
			if err != nil || !ok {
				return -1
			}
			return v
		}
		// Every kind is written, 0 included (-1: none written).
		want := map[string]int64{activity.DriftMismatches: 1}
		for _, kind := range licenses.DriftKinds {
			want[activity.DriftKind(kind)] = 0
		}
		want[activity.DriftKind(licenses.DriftSiteGone)] = 1
		got := map[string]int64{}
		if !testkit.Poll(10*time.Second, func() bool {
			for m, n := range want {
				if got[m] = latest(m); got[m] != n {
					return false
				}
			}
			return true
		}) {
			t.Errorf("the drift loop recorded %v, want %v", got, want)
		}
	})
}

// createLicense licenses the domain to consumer c1 through the guarded
// create, as a request does.
func createLicense(t *testing.T, a *App, domain string) licenses.License {
	t.Helper()
	ctx := context.Background()
	in := licenses.Input{Name: "Shop", Domain: domain}
	if _, _, err := a.Operations.StoreLicense.Do(ctx, a.Guard, idempotency.Caller{ConsumerID: "c1"}, "create-"+domain, in, []byte(domain)); err != nil {
		t.Fatal(err)
	}
	lic, err := a.Licenses.Held(ctx, "c1", domain)
	if err != nil {
		t.Fatal(err)
	}
	return lic
}
