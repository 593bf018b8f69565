package database_test

import (
	"context"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Migration 20 gives every license recorded before it its site's claim:
// the oldest license of a site, should two name one, holds it.
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
		for i, l := range []struct{ id, site, status string }{
			{"L1", "site-a", "revoked"}, {"L2", "site-b", "active"}, {"L3", "site-a", "active"},
		} {
			var active any
			if l.status == "active" {
				active = l.id + ".test"
			}
			if err := db.Gorm.Exec(`INSERT INTO licenses (id, consumer_id, name, domain, active_domain, license_key, status, vendor_site_id, created_at, updated_at)
				VALUES (?, 'c1', 'n', ?, ?, 'k', ?, ?, ?, ?)`, l.id, l.id+".test", active, l.status, l.site, at.Add(time.Duration(i)*time.Second), at).Error; err != nil {
				t.Fatal(err)
			}
		}
		if n, err := m.Up(ctx); err != nil || n != 1 {
			t.Fatalf("Up = %d, %v; want 20 applied", n, err)
		}
		var claims []struct{ VendorSiteID, LicenseID string }
		if err := db.Gorm.Raw("SELECT vendor_site_id, license_id FROM vendor_site_claims ORDER BY vendor_site_id").Scan(&claims).Error; err != nil {
			t.Fatal(err)
		}
		if len(claims) != 2 || claims[0] != (struct{ VendorSiteID, LicenseID string }{"site-a", "L1"}) || claims[1].LicenseID != "L2" {
			t.Errorf("claims %+v; want site-a by L1 (the oldest), site-b by L2", claims)
		}
	})
}
