package licenses

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A vendor site is claimed once: a discard spares a site a license claimed
// (and deletes nothing), a discarded site is never recorded, nor is the
// site of a license since revoked; a discard whose delete failed leaves it
// owed, and DeleteOwedSites deletes it once the vendor answers.
func TestSiteClaims(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		b := newBench(t, db)
		ctx := context.Background()
		record := func(consumer string, site Site) error {
			n, err := b.s.Draft(ctx, consumer, Input{Name: "A", Domain: site.Domain}, site, EventAdopted, "")
			if err != nil {
				t.Fatal(err)
			}
			return db.Gorm.Transaction(func(tx *gorm.DB) error { return b.s.Insert(tx, n) })
		}

		held := b.create("held.test", "")
		if err := b.s.DiscardSite(ctx, Site{ID: held.VendorSiteID}); err != nil || !b.v.has("held.test") {
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
		if err := b.s.DiscardSite(ctx, made); err != nil || !b.v.has("made.test") {
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
		if err := b.s.DiscardSite(ctx, other); err == nil || !b.v.has("other.test") {
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
		n, err := b.s.Draft(ctx, "c1", Input{Name: "A", Domain: "early.test"}, site, EventAdopted, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Gorm.Transaction(func(tx *gorm.DB) error { return b.s.Insert(tx, n) }); !errors.Is(err, ErrSiteSpent) {
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
