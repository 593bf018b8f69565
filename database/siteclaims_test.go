package database_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Migration 20 gives every license recorded before it its site's claim:
// the newest license of a site, should two name one, holds it.
func TestSiteClaimsMigrationClaimsTheLicensesSites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		m, err := database.NewMigrator(db.Gorm)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := m.Down(ctx); err != nil || v != 20 {
			t.Fatalf("Down = %d, %v; want 20 rolled back", v, err)
		}
		at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)", "c1", "c1", at, at).Error; err != nil {
			t.Fatal(err)
		}
		for i, l := range []struct{ id, domain, site, status string }{
			{"L1", "A.test", "site-a", "revoked"}, {"L2", "b.test", "site-b", "active"}, {"L3", "c.test", "site-a", "active"},
			{"L4", "a.test", "site-a", "active"}, // the vendor gave site-a to a.test again: the newer holds it
		} {
			var active any
			if l.status == "active" {
				active = l.domain
			}
			if err := db.Gorm.Exec(`INSERT INTO licenses (id, consumer_id, name, domain, active_domain, license_key, status, vendor_site_id, created_at, updated_at)
				VALUES (?, 'c1', 'n', ?, ?, 'k', ?, ?, ?, ?)`, l.id, l.domain, active, l.status, l.site, at.Add(time.Duration(i)*time.Second), at).Error; err != nil {
				t.Fatal(err)
			}
		}
		if n, err := m.Up(ctx); err != nil || n != 1 {
			t.Fatalf("Up = %d, %v; want 20 applied", n, err)
		}
		type claim struct{ VendorSiteID, Domain, LicenseID string }
		var claims []claim
		if err := db.Gorm.Raw("SELECT vendor_site_id, domain, license_id FROM vendor_site_claims ORDER BY vendor_site_id, domain").Scan(&claims).Error; err != nil {
			t.Fatal(err)
		}
		want := []claim{{"site-a", "a.test", "L4"}, {"site-a", "c.test", "L3"}, {"site-b", "b.test", "L2"}}
		if fmt.Sprint(claims) != fmt.Sprint(want) {
			t.Errorf("claims %+v; want %+v (one a site and domain)", claims, want)
		}
	})
}
