package licenses

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A vendor site is claimed once: a discard spares a site a license claimed
// (and deletes nothing), a discarded site is never recorded, nor is the
// site of a license since revoked; a discard whose delete failed deletes on
// the next try.
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
		if deleted, err := b.s.DiscardSite(ctx, Site{ID: held.VendorSiteID}); deleted || err != nil || !b.v.has("held.test") {
			t.Fatalf("DiscardSite of a recorded site = %v, %v (site kept %v); want it spared", deleted, err, b.v.has("held.test"))
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
		b.v.deleteErr = []error{unavailable}
		if deleted, err := b.s.DiscardSite(ctx, made); deleted || !errors.Is(err, ErrVendorUnavailable) || !b.v.has("made.test") {
			t.Fatalf("DiscardSite whose delete failed = %v, %v; want the vendor's failure, the site there", deleted, err)
		}
		if err := record("c1", made); !errors.Is(err, ErrSiteSpent) {
			t.Fatalf("recording a discarded site = %v; want ErrSiteSpent", err)
		}
		if deleted, err := b.s.DiscardSite(ctx, made); !deleted || err != nil || b.v.has("made.test") {
			t.Fatalf("DiscardSite again = %v, %v (site kept %v); want it deleted", deleted, err, b.v.has("made.test"))
		}
		if n := b.rows("licenses"); n != 1 {
			t.Errorf("%d licenses; want the one recorded first (a spent site's insert rolled back)", n)
		}
	})
}
