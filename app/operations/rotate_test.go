package operations

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// rotate asks c1 to rotate the license id's key under key, as a request does.
func (r *rig) rotate(key, id string) (idempotency.Response, error) {
	resp, _, err := r.ops.RotateLicenseKey.Do(context.Background(), r.guard, idempotency.Caller{ConsumerID: "c1"}, key, id, request.LicenseIntent(id))
	return resp, err
}

// Two rotations of one license race: the first gets its key from the vendor,
// the second gets a newer one and records it, and only then does the first
// record its own. The first must not put back the key the vendor replaced:
// the license ends with the key the vendor holds, and the first answers the
// license as it then is.
func TestRotationsRacingKeepTheVendorsLastKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("a.test")
		r.v.afterRotate = func() { // the first rotation has its key; the second runs whole
			if _, err := r.rotate("second", lic.ID); err != nil {
				t.Errorf("second rotation: %v", err)
			}
		}
		resp, err := r.rotate("first", lic.ID)
		if err != nil {
			t.Fatalf("first rotation: %v", err)
		}
		site, err := r.v.Vendor.FindSite(context.Background(), "a.test")
		if err != nil || site == nil {
			t.Fatalf("the vendor's site: %v, %v", site, err)
		}
		after, err := r.svc.Rotatable(context.Background(), "c1", lic.ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.LicenseKey != site.LicenseKey {
			t.Errorf("the license holds a key the vendor replaced; want the vendor's last key")
		}
		if after.LicenseKey == lic.LicenseKey {
			t.Errorf("the license still holds the leaked key")
		}
		if !bytes.Contains(resp.Body, []byte(site.LicenseKey)) {
			t.Errorf("the first rotation's answer does not show the key the license holds")
		}
	})
}

// A revoke settles the license's open rotations: a rotation left pending by
// a lost answer is superseded, not left to fail on a revoked license.
func TestRevokeSupersedesTheLicensesRotations(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("a.test")
		r.v.rotateErr = []error{&licenses.UncertainError{Err: errInjected}}
		if _, err := r.rotate("k1", lic.ID); !errors.Is(err, idempotency.ErrPending) {
			t.Fatalf("rotate = %v; want it pending (the answer lost)", err)
		}
		if err := r.revoke(lic.ID); err != nil {
			t.Fatalf("revoke: %v", err)
		}
		var status string
		if err := db.Gorm.Model(&idempotency.Record{}).Where("operation = ? AND idempotency_key = ?", "licenses.rotate_key", "k1").
			Select("status").Scan(&status).Error; err != nil {
			t.Fatal(err)
		}
		if status != "superseded" {
			t.Errorf("the rotation's intent is %s after the revoke; want superseded", status)
		}
	})
}

// A create whose lease ran out while the vendor made its site (another
// owner took the intent over) cannot record it, and discards it: the site
// is deleted unless the new owner recorded it first (its claim spares it).
// Either way the new owner ends with a license holding the vendor's site.
func TestLeaseLostMeanwhile(t *testing.T) {
	t.Run("the site discarded", func(t *testing.T) {
		testdb.Each(t, func(t *testing.T, db *testdb.DB) {
			r := newRig(t, db)
			other := dbtime.Now().Add(time.Hour) // the new owner's lease
			r.v.beforeCreate = func() { r.intent("licenses.store", "k1", map[string]any{"locked_until": other}) }
			if _, err := r.create("c1", "k1", "a.test"); !errors.Is(err, idempotency.ErrLeaseLost) {
				t.Fatalf("create = %v; want ErrLeaseLost", err)
			}
			r.v.beforeCreate = nil
			if r.v.has("a.test") {
				t.Fatalf("the site the create could not record is still at the vendor: nobody may hold it")
			}
			r.intent("licenses.store", "k1", map[string]any{"status": "pending", "locked_until": nil}) // the new owner: the reconciler
			if got := r.reconcile(); got != "completed" {
				t.Fatalf("reconcile = %s; want completed", got)
			}
			r.holdsTheVendorsSite("c1", "a.test")
		})
	})
	t.Run("the new owner's site spared", func(t *testing.T) {
		testdb.Each(t, func(t *testing.T, db *testdb.DB) {
			r := newRig(t, db)
			r.v.afterCreate = func() { // the reconciler takes the intent over, finds the site and records it
				r.intent("licenses.store", "k1", map[string]any{"status": "pending", "locked_until": nil})
				if got := r.reconcile(); got != "completed" {
					t.Errorf("reconcile = %s; want completed", got)
				}
			}
			// The old owner finds the domain's license recorded (its INSERT
			// loses to the new owner's) and answers it, a 200 never stored.
			if resp, err := r.create("c1", "k1", "a.test"); err != nil || resp.Status != 200 {
				t.Fatalf("create = %d, %v; want 200 with the new owner's license", resp.Status, err)
			}
			if !r.v.has("a.test") {
				t.Fatalf("the site the new owner recorded was deleted")
			}
			r.holdsTheVendorsSite("c1", "a.test")
		})
	})
}

// A failed rotation retried with its key, after the vendor lost the site,
// is refused as a rotation sent now would be (the vendor's 404: 422
// vendor_rejected), never an error the API does not document; the reconciler
// gives such an intent up for an operator (failed, never retried).
func TestRotationRetriedAfterTheSiteWentIsRejected(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db)
		lic := r.license("a.test")
		r.v.rotateErr = []error{&licenses.UncertainError{Err: errInjected}}
		if _, err := r.rotate("k1", lic.ID); !errors.Is(err, idempotency.ErrPending) {
			t.Fatalf("rotate = %v; want it pending", err)
		}
		if err := r.v.Vendor.DeleteSite(context.Background(), lic.VendorSiteID); err != nil {
			t.Fatal(err)
		}
		r.intent("licenses.rotate_key", "k1", map[string]any{"status": idempotency.StatusFailed, "locked_until": nil})
		_, err := r.rotate("k1", lic.ID)
		if !errors.Is(err, licenses.ErrVendorSiteNotFound) || !errors.Is(err, licenses.ErrVendorRejected) {
			t.Fatalf("retry = %v; want the vendor's 404 (vendor_rejected)", err)
		}
		r.intent("licenses.rotate_key", "k1", map[string]any{"status": idempotency.StatusPending, "locked_until": nil})
		if got := r.reconcile(); got != "failed" {
			t.Errorf("reconcile = %s; want failed (given up)", got)
		}
	})
}
