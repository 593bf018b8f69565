package operations

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/request"
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
