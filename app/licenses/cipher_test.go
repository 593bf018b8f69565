package licenses

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// testCipher is a Cipher under a key made of the byte b.
func testCipher(t testing.TB, b byte, previous ...[]byte) *crypt.Cipher {
	t.Helper()
	c, err := crypt.New(bytes.Repeat([]byte{b}, crypt.KeySize), previous...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func seedConsumer(t testing.TB, db *testdb.DB, id string) {
	t.Helper()
	now := time.Now().UTC()
	if err := db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)", id, id, now, now).Error; err != nil {
		t.Fatal(err)
	}
}

func storedKey(t *testing.T, db *testdb.DB, id string) string {
	t.Helper()
	var key string
	if err := db.Gorm.Raw("SELECT license_key FROM licenses WHERE id = ?", id).Scan(&key).Error; err != nil {
		t.Fatal(err)
	}
	return key
}

// The license key is encrypted in its row and plaintext on every read path.
func TestLicenseKeyEncryptedAtRest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		seedConsumer(t, db, "c1")
		c := testCipher(t, 1)
		s := New(Config{DB: db.Gorm, Vendor: &deadlineVendor{}, Cipher: c})
		ctx := context.Background()
		lic, created, err := s.create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, "", nil)
		if err != nil || !created || lic.LicenseKey != "LK" {
			t.Fatalf("Create = %+v, %v, %v", lic, created, err)
		}
		raw := storedKey(t, db, lic.ID)
		if strings.Contains(raw, "LK") || !crypt.Encrypted(raw) {
			t.Errorf("stored license_key = %q, want an envelope", raw)
		}
		if got, err := c.Decrypt(raw); err != nil || string(got) != "LK" {
			t.Errorf("the envelope opens to %q, %v", got, err)
		}

		if got, err := s.Get(ctx, "c1", lic.ID); err != nil || got.LicenseKey != "LK" {
			t.Errorf("Get = %q, %v", got.LicenseKey, err)
		}
		if p, err := s.List(ctx, "c1", 1, 10); err != nil || len(p.Licenses) != 1 || p.Licenses[0].LicenseKey != "LK" {
			t.Errorf("List = %+v, %v", p, err)
		}
		again, created, err := s.create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, "", nil) // activeFor
		if err != nil || created || again.LicenseKey != "LK" {
			t.Errorf("second Create = %q, %v, %v", again.LicenseKey, created, err)
		}
		held, err := s.Held(ctx, "c1", "a.test") // what a create that loses the domain's race answers
		if err != nil || held.LicenseKey != "LK" {
			t.Errorf("Held = %q, %v", held.LicenseKey, err)
		}
	})
}

// A row written before encryption at rest reads as it is.
func TestLegacyPlaintextKeyReads(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		seedConsumer(t, db, "c1")
		now := dbtime.Now()
		domain := "old.test"
		legacy := License{ID: "01LEGACY", ConsumerID: "c1", Name: "Old", Domain: domain, ActiveDomain: &domain,
			LicenseKey: "LK-plain", Status: StatusActive, VendorSiteID: "s0", CreatedAt: now, UpdatedAt: now}
		if err := db.Gorm.Create(&legacy).Error; err != nil {
			t.Fatal(err)
		}
		s := New(Config{DB: db.Gorm, Vendor: &deadlineVendor{}, Cipher: testCipher(t, 1)})
		if got, err := s.Get(context.Background(), "c1", legacy.ID); err != nil || got.LicenseKey != "LK-plain" {
			t.Errorf("Get = %q, %v", got.LicenseKey, err)
		}
	})
}

// Under a key that cannot open it, a read fails, and the error shows neither
// the license key nor its envelope; a revoke, which needs no key, works.
func TestUndecryptableKeyFailsQuietly(t *testing.T) {
	db := testdb.New(t, "sqlite")
	seedConsumer(t, db, "c1")
	ctx := context.Background()
	lic, _, err := New(Config{DB: db.Gorm, Vendor: &deadlineVendor{}, Cipher: testCipher(t, 1)}).create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	other := New(Config{DB: db.Gorm, Vendor: &deadlineVendor{}, Cipher: testCipher(t, 2)})
	_, err = other.Get(ctx, "c1", lic.ID)
	if !errors.Is(err, crypt.ErrDecrypt) {
		t.Fatalf("Get under another key = %v, want ErrDecrypt", err)
	}
	if strings.Contains(err.Error(), "LK") || strings.Contains(err.Error(), storedKey(t, db, lic.ID)) {
		t.Errorf("the error leaks the key: %v", err)
	}
	if _, err := other.List(ctx, "c1", 1, 10); !errors.Is(err, crypt.ErrDecrypt) {
		t.Errorf("List under another key = %v, want ErrDecrypt", err)
	}
	if err := other.revoke(ctx, "c1", lic.ID, nil); err != nil {
		t.Errorf("Revoke under another key = %v", err)
	}
}

func TestNewRefusesNoCipher(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New without a Cipher did not panic")
		}
	}()
	New(Config{})
}
