package operations

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// rotateKey gives a license a new key at the vendor: 200 with the license.
// Its input, and its subject, is the license's id. Its phases:
//
//	reserved   the consumer's license, active or suspended (404, 409)
//	started    from here the vendor may hear of it
//	vendor     the site's new key (no transaction open)
//	finished   the license's new key, its events and the 200, one transaction
//
// A rotation that may have reached the vendor (resumed when pending, or
// taken over after a crash or a failure) is never sent blindly: the site is
// read first. A key other than the license's is the rotation's, recorded; a
// key the license took since the intent began is too (the vendor's own
// site.key_rotated may have told of it first); only a key unchanged since
// then means the vendor never applied it, and it is asked again (a rotation
// converges: its goal is a key other than the leaked one).
func rotateKey(svc *licenses.Service) idempotency.Operation[string] {
	// finish records key over the license's key as lic read it. Should
	// another rotation have been recorded since (licenses.ErrKeyMoved), the
	// site as the vendor now holds it decides, over the key as it now is.
	finish := func(ctx context.Context, x *idempotency.Execution, lic licenses.License, key string) (idempotency.Response, error) {
		var resp idempotency.Response
		var err error
		for range 3 {
			resp, err = x.Finish(ctx, func(tx *gorm.DB) (idempotency.Response, error) {
				after, err := svc.KeyRotated(ctx, tx, lic.ID, lic.LicenseKey, key)
				if err != nil {
					return idempotency.Response{}, err
				}
				return licenseAnswer(after, false)
			})
			if !errors.Is(err, licenses.ErrKeyMoved) {
				break
			}
			if lic, err = svc.Rotatable(ctx, x.ConsumerID, lic.ID); err != nil {
				break
			}
			site, err := licenseSite(ctx, svc, lic)
			if err != nil {
				break
			}
			key = site.LicenseKey
		}
		if err != nil && !refused(err) && !errors.Is(err, licenses.ErrNotActive) {
			// The vendor rotated the key and it is not recorded: as unknown
			// as a lost answer, and resumed the same way.
			err = &licenses.UncertainError{Err: err}
		}
		return resp, err
	}
	rotate := func(ctx context.Context, x *idempotency.Execution, lic licenses.License) (idempotency.Response, error) {
		if err := x.Start(ctx); err != nil {
			return idempotency.Response{}, err
		}
		site, err := svc.RotateKey(ctx, lic)
		if err != nil {
			return idempotency.Response{ResourceType: "license", ResourceID: lic.ID, ExternalRef: lic.VendorSiteID}, err
		}
		return finish(ctx, x, lic, site.LicenseKey)
	}
	// converge finishes a rotation that may have reached the vendor, from
	// the site as the vendor holds it; it rotates again only when mayRotate
	// and the key is unchanged since the intent began.
	converge := func(ctx context.Context, x *idempotency.Execution, lic licenses.License, mayRotate bool) (idempotency.Response, bool, error) {
		site, err := licenseSite(ctx, svc, lic)
		if err != nil {
			return idempotency.Response{}, false, err
		}
		rotated := site.LicenseKey != lic.LicenseKey
		if !rotated {
			if rotated, err = svc.RotatedSince(ctx, lic.ID, x.Began()); err != nil {
				return idempotency.Response{}, false, err
			}
		}
		var resp idempotency.Response
		switch {
		case rotated: // recorded (a key already in place writes nothing)
			resp, err = finish(ctx, x, lic, site.LicenseKey)
		case !mayRotate: // not rotated yet: the call may still be on its way
			return idempotency.Response{}, false, nil
		default:
			resp, err = rotate(ctx, x, lic)
		}
		return resp, err == nil, err
	}
	return idempotency.Operation[string]{
		Name:    "licenses.rotate_key",
		Subject: func(id string) string { return id }, // a rotation finished settles the older ones of its license
		Run: func(ctx context.Context, x *idempotency.Execution, id string) (idempotency.Response, error) {
			ctx = requestActor(ctx, x.Caller)
			lic, err := svc.Rotatable(ctx, x.ConsumerID, id)
			if err != nil {
				return idempotency.Response{}, err
			}
			if x.MayHaveStarted() {
				resp, _, err := converge(ctx, x, lic, true)
				return resp, err
			}
			return rotate(ctx, x, lic)
		},
		Resume: func(ctx context.Context, x *idempotency.Execution, rec *idempotency.Record, mayCreate bool) (idempotency.Response, bool, error) {
			ctx = reconcilerActor(ctx, x.Caller)
			if rec.Subject == nil {
				return idempotency.Response{}, false, fmt.Errorf("%w: the intent names no license", idempotency.ErrAbandon)
			}
			lic, err := svc.Rotatable(ctx, rec.ConsumerID, *rec.Subject)
			if errors.Is(err, licenses.ErrNotFound) || errors.Is(err, licenses.ErrNotActive) {
				return idempotency.Response{}, false, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			}
			if err != nil {
				return idempotency.Response{}, false, err
			}
			resp, done, err := converge(ctx, x, lic, mayCreate)
			if errors.Is(err, licenses.ErrVendorRejected) {
				err = fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			}
			return resp, done, err
		},
	}
}

// licenseSite is the license's site as the vendor now holds it; a vendor
// that no longer holds it is the vendor's 404 (licenses.ErrVendorSiteNotFound,
// 422 vendor_rejected), as a rotation sent now would meet.
func licenseSite(ctx context.Context, svc *licenses.Service, lic licenses.License) (licenses.Site, error) {
	site, err := svc.FindSite(ctx, lic.Domain)
	if err != nil {
		return licenses.Site{}, err
	}
	if site == nil || site.ID != lic.VendorSiteID {
		return licenses.Site{}, fmt.Errorf("%w: %w", licenses.ErrVendorSiteNotFound,
			&licenses.RejectedError{Status: http.StatusNotFound, Message: "the vendor holds no site of the license"})
	}
	return *site, nil
}
