package tests

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/activity"
	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/tests/testdb"
)

// activityTotals sums the last day of each counter the console charts, as
// the recorder of the app answers it (its unflushed counts included).
func (a *app) activityTotals() map[string]int64 {
	a.t.Helper()
	series, err := a.app.Activity.Series(context.Background(), []string{activity.Creates, activity.Replays, activity.Conflicts, activity.Pending}, 24)
	if err != nil {
		a.t.Fatal(err)
	}
	out := map[string]int64{}
	for m, ps := range series {
		if len(ps) != 24 {
			a.t.Errorf("series of %s has %d hours, want 24", m, len(ps))
		}
		for _, p := range ps {
			out[m] += p.Count
		}
	}
	return out
}

// Each request moves the console's series it belongs to, through the
// application as serve builds it: a keyed create and a keyless one count as
// creates, a replay as a replay, a key reused for another body (422) and a
// key still in progress (409) as conflicts, a 202 and its retry as pending;
// the counts are in the series at once, and in the table, once, after a
// flush.
func TestActivityCountsTheRequests(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		want := map[string]int64{activity.Creates: 0, activity.Replays: 0, activity.Conflicts: 0, activity.Pending: 0}
		step := func(what, metric string) {
			t.Helper()
			want[metric]++
			if got := a.activityTotals(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after %s the series sum to %v, want %v", what, got, want)
			}
		}
		a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-1")...).wantStatus(http.StatusCreated)
		step("a keyed create", activity.Creates)

		r := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-1")...).wantStatus(http.StatusCreated)
		if r.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the retry was not replayed: %v", r.Header())
		}
		step("its replay", activity.Replays)

		a.do(http.MethodPost, "/api/licenses", `{"name":"Other","domain":"other.test"}`, keyed(acme, "order-1")...).
			wantError(http.StatusUnprocessableEntity, "idempotency_key_reused")
		step("the key reused for another body", activity.Conflicts)

		a.do(http.MethodPost, "/api/licenses", `{"name":"K","domain":"keyless.test"}`, acme...).wantStatus(http.StatusCreated)
		step("a keyless create", activity.Creates)

		a.vendor.script("POST", reply{status: 502, body: `bad gateway`, commit: true})
		a.do(http.MethodPost, "/api/licenses", `{"name":"P","domain":"pending.test"}`, keyed(acme, "order-2")...).
			wantError(http.StatusAccepted, "operation_pending")
		step("a 202", activity.Pending)
		a.do(http.MethodPost, "/api/licenses", `{"name":"P","domain":"pending.test"}`, keyed(acme, "order-2")...).
			wantError(http.StatusAccepted, "operation_pending")
		step("its retry, pending still", activity.Pending)

		a.plantRecord("acme", "order-3", acmeBody, "processing", time.Minute)
		a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "order-3")...).wantError(http.StatusConflict, "request_in_progress")
		step("a key in progress", activity.Conflicts)

		// Flushed, the table holds each count once, and the series is unchanged.
		if err := a.app.Activity.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var rows []struct {
			Metric string
			Count  int64
		}
		if err := db.Gorm.Raw("SELECT metric, SUM(`count`) AS count FROM activity_hours GROUP BY metric").Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		stored := map[string]int64{activity.Creates: 0, activity.Replays: 0, activity.Conflicts: 0, activity.Pending: 0}
		for _, r := range rows {
			stored[r.Metric] = r.Count
		}
		if fmt.Sprint(stored) != fmt.Sprint(want) {
			t.Errorf("after a flush the table holds %v, want %v", stored, want)
		}
		if got := a.activityTotals(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after a flush the series sum to %v, want %v", got, want)
		}
	})
}

// `licensor drift` writes the mismatches its check left, in all and by
// kind, for the console's gauge: those found without --fix, none once
// --fix applied them. A check refused (the vendor lists nothing) writes
// nothing.
func TestDriftCommandRecordsTheMismatches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.createLicenses("gone.test", "kept.test")
		latest := func(metric string) int64 {
			t.Helper()
			v, _, ok, err := a.app.Activity.Latest(context.Background(), metric)
			if err != nil || !ok {
				t.Fatalf("Latest(%s) = %d, ok %v, %v", metric, v, ok, err)
			}
			return v
		}
		a.vendor.mu.Lock()
		delete(a.vendor.sites, "gone.test")
		a.vendor.mu.Unlock()
		if _, _, err := a.drift(nil); console.ExitCode(err) != 1 {
			t.Fatalf("drift with a site gone = %v, want exit 1", err)
		}
		if n, gone := latest(activity.DriftMismatches), latest(activity.DriftKind(licenses.DriftSiteGone)); n != 1 || gone != 1 {
			t.Errorf("after drift: %s = %d, %s = %d; want 1 and 1", activity.DriftMismatches, n, licenses.DriftSiteGone, gone)
		}
		if out, _, err := a.drift(nil, "--fix", "--force"); err != nil {
			t.Fatalf("drift --fix --force = %v\n%s", err, out)
		}
		if n, gone := latest(activity.DriftMismatches), latest(activity.DriftKind(licenses.DriftSiteGone)); n != 0 || gone != 0 {
			t.Errorf("after drift --fix: %s = %d, %s = %d; want 0 and 0", activity.DriftMismatches, n, licenses.DriftSiteGone, gone)
		}
		a.vendor.mu.Lock()
		clear(a.vendor.sites)
		a.vendor.mu.Unlock()
		if _, _, err := a.drift(nil); console.ExitCode(err) != 1 {
			t.Fatalf("drift against a vendor listing nothing = %v, want exit 1", err)
		}
		if n := latest(activity.DriftMismatches); n != 0 {
			t.Errorf("a refused check wrote %s = %d, want the last check's 0 kept", activity.DriftMismatches, n)
		}
	})
}
