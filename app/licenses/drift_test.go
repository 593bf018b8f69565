package licenses

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// mismatchBench is a bench whose service logs to logs and counts the sites
// matched by id and not by domain in counts, by source.
type mismatchBench struct {
	*bench
	logs   *testkit.Buffer
	mu     sync.Mutex
	counts map[string]int
}

func newMismatchBench(t *testing.T, db *testdb.DB) *mismatchBench {
	t.Helper()
	m := &mismatchBench{bench: newBench(t, db), logs: &testkit.Buffer{}, counts: map[string]int{}}
	m.s = New(Config{DB: db.Gorm, Vendor: m.v, Cipher: testCipher(t, 1),
		Log: slog.New(slog.NewTextHandler(m.logs, nil)),
		ObserveSiteMismatch: func(source string) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.counts[source]++
		}})
	return m
}

func (m *mismatchBench) count(source string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[source]
}

// A vendor that lists no site while licenses are in force is suspect: the
// check fails with ErrVendorListsNothing naming how many licenses it will
// not treat as deleted, reports no deletion, and with a fix (forced too)
// revokes nothing.
func TestDriftRefusesAVendorListingNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		past := dbtime.Now().Add(-time.Hour)
		for _, id := range []string{"a", "b", "c"} {
			seedLicense(t, db, id, StatusActive, "s-"+id, "K", past)
		}
		for _, opts := range []DriftOptions{{}, {Fix: true, MaxFix: 100}, {Fix: true, Force: true}} {
			report, err := b.s.DriftWith(context.Background(), b.v, opts)
			if !errors.Is(err, ErrVendorListsNothing) || !strings.Contains(err.Error(), "the vendor lists no sites: refusing to treat 3 license(s) as deleted") {
				t.Errorf("%+v: err = %v, want ErrVendorListsNothing", opts, err)
			}
			if len(report.Mismatches) != 0 || report.Licenses != 3 {
				t.Errorf("%+v: report = %+v, want 3 licenses and no mismatch", opts, report)
			}
		}
		for _, id := range []string{"a", "b", "c"} {
			if got := b.status(id); got != StatusActive {
				t.Errorf("license %s is %s, want active", id, got)
			}
		}
		// No license in force: an empty vendor is simply clean.
		empty := newBench(t, testdb.New(t, db.Dialect))
		if r, err := empty.s.DriftWith(context.Background(), empty.v, DriftOptions{Fix: true}); err != nil || len(r.Mismatches) != 0 {
			t.Errorf("no licenses, no sites = %+v, %v", r, err)
		}
	})
}

// A fix that would revoke or re-key more licenses than MaxFix applies
// nothing at all (not even the harmless fixes) and says so, with the report
// of what it would do; Force applies them all.
func TestDriftFixIsBounded(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		past := dbtime.Now().Add(-time.Hour)
		seedLicense(t, db, "gone1", StatusActive, "s1", "K", past)
		seedLicense(t, db, "gone2", StatusActive, "s2", "K", past)
		seedLicense(t, db, "rekeyed", StatusActive, "s3", "K", past)
		seedLicense(t, db, "paused", StatusActive, "s4", "K", past)
		b.v.extra = []Site{
			{ID: "s3", Domain: "rekeyed.test", LicenseKey: "K-new", Status: StatusActive},
			{ID: "s4", Domain: "paused.test", LicenseKey: "K", Status: StatusSuspended},
		}
		report, err := b.s.DriftWith(context.Background(), b.v, DriftOptions{Fix: true, MaxFix: 2})
		if !errors.Is(err, ErrTooManyFixes) || !strings.Contains(err.Error(), "3 fix(es) would revoke a license or replace its key, more than the bound of 2; nothing applied") {
			t.Fatalf("err = %v, want ErrTooManyFixes", err)
		}
		if len(report.Mismatches) != 4 || report.Destructive() != 3 || report.Unfixed() != 4 {
			t.Errorf("report = %+v, want 4 mismatches, 3 destructive, none fixed", report)
		}
		for _, id := range []string{"gone1", "gone2", "rekeyed", "paused"} {
			if got := b.status(id); got != StatusActive {
				t.Errorf("license %s is %s after a refused fix, want active", id, got)
			}
		}
		if got := storedKey(t, db, "rekeyed"); got != "K" {
			t.Errorf("rekeyed's key = %q after a refused fix", got)
		}
		// At the bound it applies.
		report, err = b.s.DriftWith(context.Background(), b.v, DriftOptions{Fix: true, MaxFix: 3})
		if err != nil || report.Unfixed() != 0 {
			t.Fatalf("at the bound: %+v, %v", report, err)
		}
		if b.status("gone1") != StatusRevoked || b.status("paused") != StatusSuspended || storedKey(t, db, "rekeyed") == "K" {
			t.Errorf("after the fix: gone1 %s, paused %s, rekeyed key %q", b.status("gone1"), b.status("paused"), storedKey(t, db, "rekeyed"))
		}
	})
}

// Force lifts the bound, MaxFix 0 included.
func TestDriftFixForced(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		past := dbtime.Now().Add(-time.Hour)
		seedLicense(t, db, "gone", StatusActive, "s1", "K", past)
		seedLicense(t, db, "kept", StatusActive, "s2", "K", past)
		b.v.extra = []Site{{ID: "s2", Domain: "kept.test", LicenseKey: "K", Status: StatusActive}}
		if _, err := b.s.DriftWith(context.Background(), b.v, DriftOptions{Fix: true}); !errors.Is(err, ErrTooManyFixes) {
			t.Fatalf("MaxFix 0 without Force = %v, want ErrTooManyFixes", err)
		}
		report, err := b.s.DriftWith(context.Background(), b.v, DriftOptions{Fix: true, Force: true})
		if err != nil || len(report.Mismatches) != 1 || !report.Mismatches[0].Fixed || b.status("gone") != StatusRevoked {
			t.Errorf("forced = %+v, %v; gone is %s", report, err, b.status("gone"))
		}
	})
}

// A vendor site whose id is a license's but whose domain is another's (the
// vendor gave the id again) is reported as domain_differs, never fixed,
// logged at Warn with ids only, and counted as a drift mismatch.
func TestDriftMatchesASiteByIdAndDomain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newMismatchBench(t, db)
		past := dbtime.Now().Add(-time.Hour)
		seedLicense(t, db, "old", StatusActive, "site_1", "K-old", past)
		b.v.extra = []Site{{ID: "site_1", Domain: "someone-else.test", LicenseKey: "K-else", Status: StatusSuspended}}
		report, err := b.s.DriftWith(context.Background(), b.v, DriftOptions{Fix: true, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		want := Mismatch{Kind: DriftDomain, LicenseID: "old", SiteID: "site_1", Domain: "old.test"}
		if len(report.Mismatches) != 1 || report.Mismatches[0] != want || report.Unfixed() != 1 {
			t.Errorf("report = %+v, want only %+v", report.Mismatches, want)
		}
		if got, key := b.status("old"), storedKey(t, db, "old"); got != StatusActive || key != "K-old" {
			t.Errorf("the license is %s with key %q, want untouched", got, key)
		}
		if n := b.count(MismatchDrift); n != 1 {
			t.Errorf("%d drift mismatches counted, want 1", n)
		}
		logs := b.logs.String()
		if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "site_id=site_1") || !strings.Contains(logs, "source=drift") ||
			strings.Contains(logs, "K-else") || strings.Contains(logs, "K-old") {
			t.Errorf("logs = %s", logs)
		}
	})
}

// A vendor event is applied to the license of its site id only when its
// domain is the license's too (case aside): another domain, or none, is
// not applied, logged at Warn with the event and site ids, and counted as a
// webhook mismatch.
func TestVendorEventMatchesBySiteIdAndDomain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newMismatchBench(t, db)
		ctx := context.Background()
		past := dbtime.Now().Add(-time.Hour)
		seedLicense(t, db, "l1", StatusActive, "site_1", "K1", past)
		at := time.Now().UTC()
		for i, domain := range []string{"other.test", "", "  "} {
			ev := VendorEvent{ID: "evt_" + string(rune('a'+i)), Type: SiteDeleted, At: at, Site: Site{ID: "site_1", Domain: domain}}
			if changed, err := b.s.apply(ctx, ev); changed || err != nil {
				t.Errorf("domain %q: %v, %v; want nothing changed", domain, changed, err)
			}
		}
		if got := b.status("l1"); got != StatusActive {
			t.Fatalf("the license is %s, want active", got)
		}
		if n := b.count(MismatchWebhook); n != 3 {
			t.Errorf("%d webhook mismatches counted, want 3", n)
		}
		logs := b.logs.String()
		for _, want := range []string{"event_id=evt_a", "event_id=evt_b", "site_id=site_1", "reason=\"the event's site has no domain\"", "level=WARN"} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %s: %s", want, logs)
			}
		}
		if changed, err := b.s.apply(ctx, VendorEvent{ID: "evt_z", Type: SiteSuspended, At: at, Site: Site{ID: "site_1", Domain: "L1.Test"}}); !changed || err != nil {
			t.Errorf("the license's own domain (another case) = %v, %v; want applied", changed, err)
		}
		if n := b.count(MismatchWebhook); n != 3 {
			t.Errorf("a matching event was counted as a mismatch")
		}
	})
}
