package licenses

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/tests/testdb"
)

// recordSite records the consumer's license of site (for its domain) in a
// transaction of its own, as a create's last phase does; reclaim as
// NewLicense.Reclaim.
func (b *bench) recordSite(consumer string, site Site, reclaim bool) error {
	b.t.Helper()
	n, err := b.s.Draft(context.Background(), consumer, Input{Name: "A", Domain: site.Domain}, site, EventAdopted, "")
	if err != nil {
		b.t.Fatal(err)
	}
	n.Reclaim = reclaim
	return b.db.Gorm.Transaction(func(tx *gorm.DB) error { return b.s.Insert(tx, n) })
}

// A vendor site is claimed once: a discard spares a site a license claimed
// (and deletes nothing), a discarded site is never recorded, nor is the
// site of a license since revoked; a discard whose delete failed leaves it
// owed, and DeleteOwedSites deletes it once the vendor answers.
func TestSiteClaims(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		record := func(consumer string, site Site) error { return b.recordSite(consumer, site, false) }

		held := b.create("held.test", "")
		if err := b.s.DiscardSite(ctx, Site{ID: held.VendorSiteID}, "held.test"); err != nil || !b.v.has("held.test") {
			t.Fatalf("DiscardSite of a recorded site = %v (site kept %v); want it spared", err, b.v.has("held.test"))
		}
		if err := b.s.revoke(ctx, "c1", held.ID, nil); err != nil {
			t.Fatal(err)
		}
		gone := Site{ID: held.VendorSiteID, Domain: "held.test", LicenseKey: "LK-again"}
		if err := record("c2", gone); !errors.Is(err, ErrSiteSpent) {
			t.Fatalf("recording a revoked license's site = %v; want ErrSiteSpent", err)
		}

		made, err := b.v.CreateSite(ctx, "B", "made.test")
		if err != nil {
			t.Fatal(err)
		}
		b.v.deleteErr = []error{unavailable, unavailable}
		if err := b.s.DiscardSite(ctx, made, "made.test"); err != nil || !b.v.has("made.test") {
			t.Fatalf("DiscardSite whose delete failed = %v (site kept %v); want nil (the delete owed), the site there", err, b.v.has("made.test"))
		}
		if err := record("c1", made); !errors.Is(err, ErrSiteSpent) {
			t.Fatalf("recording a discarded site = %v; want ErrSiteSpent", err)
		}
		if n, err := b.s.DeleteOwedSites(ctx, 10); n != 0 || !errors.Is(err, ErrVendorUnavailable) || !b.v.has("made.test") {
			t.Fatalf("DeleteOwedSites with the vendor down = %d, %v; want none deleted, the vendor's failure", n, err)
		}
		if n, err := b.s.DeleteOwedSites(ctx, 10); n != 1 || err != nil || b.v.has("made.test") {
			t.Fatalf("DeleteOwedSites = %d, %v (site kept %v); want the owed delete done", n, err, b.v.has("made.test"))
		}
		if n, err := b.s.DeleteOwedSites(ctx, 10); n != 0 || err != nil {
			t.Fatalf("DeleteOwedSites again = %d, %v; want nothing owed", n, err)
		}
		if n := b.rows("licenses"); n != 1 {
			t.Errorf("%d licenses; want the one recorded first (a spent site's insert rolled back)", n)
		}

		// A claim that cannot be written is DiscardSite's error: nothing is known.
		other, err := b.v.CreateSite(ctx, "C", "other.test")
		if err != nil {
			t.Fatal(err)
		}
		testdb.Inject(t, db.Gorm, "create", "vendor_site_claims", nil, errors.New("injected")).Arm(1)
		if err := b.s.DiscardSite(ctx, other, "other.test"); err == nil || !b.v.has("other.test") {
			t.Fatalf("DiscardSite with its claim failing = %v (site kept %v); want the error, the site untouched", err, b.v.has("other.test"))
		}
	})
}

// A site the vendor deleted before any license recorded it (its site.deleted
// came first) is spent: the create that found it never records it.
func TestVendorDeletedSiteIsSpent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		site, err := b.v.CreateSite(ctx, "A", "early.test")
		if err != nil {
			t.Fatal(err)
		}
		if changed, err := b.s.apply(ctx, VendorEvent{ID: "evt_1", Type: SiteDeleted, At: time.Now(), Site: site}); changed || err != nil {
			t.Fatalf("apply = %v, %v; want nothing changed (no license holds the site)", changed, err)
		}
		if err := b.recordSite("c1", site, false); !errors.Is(err, ErrSiteSpent) {
			t.Fatalf("recording the deleted site = %v; want ErrSiteSpent", err)
		}
		lic := b.create("held.test", "")
		if changed, err := b.s.apply(ctx, VendorEvent{ID: "evt_2", Type: SiteDeleted, At: time.Now(), Site: Site{ID: lic.VendorSiteID, Domain: "held.test"}}); !changed || err != nil {
			t.Fatalf("apply to a license's site = %v, %v; want it revoked", changed, err)
		}
		if got := b.status(lic.ID); got != StatusRevoked {
			t.Errorf("status %s; want revoked", got)
		}
		if n, err := b.s.DeleteOwedSites(ctx, 10); n != 0 || err != nil {
			t.Errorf("DeleteOwedSites = %d, %v; want nothing owed (the vendor deleted it)", n, err)
		}
	})
}

// A site id given again is another claim for another domain; for the same
// domain the claim of a revoked license is taken over only on Reclaim (the
// vendor listed the site again), never an active license's.
func TestSiteGivenAgain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		record := func(consumer, domain, site string, reclaim bool) error {
			return b.recordSite(consumer, Site{ID: site, Domain: domain, LicenseKey: "LK"}, reclaim)
		}
		lic := b.create("x.test", "")
		if err := record("c2", "y.test", lic.VendorSiteID, false); err != nil {
			t.Fatalf("the same id for another domain = %v; want it recorded", err)
		}
		if err := record("c2", "x.test", lic.VendorSiteID, true); err == nil {
			t.Fatal("an active license's site was taken over")
		}
		if err := b.s.revoke(ctx, "c1", lic.ID, nil); err != nil {
			t.Fatal(err)
		}
		if err := record("c2", "x.test", lic.VendorSiteID, false); !errors.Is(err, ErrSiteSpent) {
			t.Fatalf("a revoked license's site without Reclaim = %v; want ErrSiteSpent", err)
		}
		if err := record("c2", "x.test", lic.VendorSiteID, true); err != nil {
			t.Fatalf("a revoked license's site on Reclaim = %v; want it taken over", err)
		}
		_, _, before := b.v.counts()
		if err := b.s.DiscardSite(ctx, Site{ID: lic.VendorSiteID}, "x.test"); err != nil {
			t.Fatal(err)
		}
		if _, _, after := b.v.counts(); after != before {
			t.Errorf("DiscardSite of the site taken over asked the vendor to delete it; want it spared")
		}
	})
}

// A site whose discard's delete was done, listed again under its id (a
// vendor giving the id again: the fake vendor after a restart), is another:
// FinishDiscard leaves it, Reclaim records it, and DiscardSite renews the
// discard and deletes it.
func TestDiscardedSiteGivenAgain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		first, err := b.v.CreateSite(ctx, "A", "again.test")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.s.DiscardSite(ctx, first, "again.test"); err != nil || b.v.has("again.test") {
			t.Fatalf("DiscardSite = %v (site kept %v); want it deleted", err, b.v.has("again.test"))
		}
		b.v.mu.Lock()
		b.v.sites["again.test"] = first // the vendor gives the id again, for the same domain
		b.v.mu.Unlock()
		if err := b.s.FinishDiscard(ctx, first, "again.test"); err != nil || !b.v.has("again.test") {
			t.Fatalf("FinishDiscard = %v (site kept %v); want the new site left", err, b.v.has("again.test"))
		}
		if err := b.recordSite("c1", first, false); !errors.Is(err, ErrSiteSpent) {
			t.Fatalf("recording it without Reclaim = %v; want ErrSiteSpent", err)
		}
		if err := b.s.DiscardSite(ctx, first, "again.test"); err != nil || b.v.has("again.test") {
			t.Fatalf("DiscardSite of the site given again = %v (site kept %v); want the discard renewed, the site deleted", err, b.v.has("again.test"))
		}
		b.v.mu.Lock()
		b.v.sites["again.test"] = first
		b.v.mu.Unlock()
		if err := b.s.FinishDiscard(ctx, first, "again.test"); err != nil {
			t.Fatal(err)
		}
		if err := b.recordSite("c1", first, true); err != nil {
			t.Fatalf("recording it on Reclaim = %v; want it recorded", err)
		}
	})
}

// An owed delete whose site the vendor no longer lists for its domain is
// noted done without a delete: the vendor deletes by id, and the id may
// have been given to another domain's site since. A site.deleted whose
// domain no license could hold is applied as before (nothing claimed).
func TestOwedDeleteOfAnIdGivenAgain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		site, err := b.v.CreateSite(ctx, "A", "one.test")
		if err != nil {
			t.Fatal(err)
		}
		b.v.deleteErr = []error{unavailable}
		if err := b.s.DiscardSite(ctx, site, "one.test"); err != nil {
			t.Fatal(err)
		}
		b.v.mu.Lock() // the failed delete went through after all, and the id went to another domain
		delete(b.v.sites, "one.test")
		again := site
		again.Domain = "two.test"
		b.v.sites["two.test"] = again
		b.v.mu.Unlock()
		_, _, before := b.v.counts()
		if n, err := b.s.DeleteOwedSites(ctx, 10); n != 1 || err != nil {
			t.Fatalf("DeleteOwedSites = %d, %v; want the owed delete settled", n, err)
		}
		if _, _, after := b.v.counts(); after != before || !b.v.has("two.test") {
			t.Errorf("%d deletes asked, two.test's site kept %v; want no delete: the id is another domain's now", after-before, b.v.has("two.test"))
		}
		if n, err := b.s.DeleteOwedSites(ctx, 10); n != 0 || err != nil {
			t.Errorf("DeleteOwedSites again = %d, %v; want nothing owed", n, err)
		}
		long := VendorEvent{ID: "evt_long", Type: SiteDeleted, At: time.Now(), Site: Site{ID: "s-long", Domain: strings.Repeat("é", 200) + ".test"}}
		if _, err := b.s.apply(ctx, long); err != nil {
			t.Errorf("a site.deleted of a domain no license can hold = %v; want it applied (nothing to change)", err)
		}
	})
}
