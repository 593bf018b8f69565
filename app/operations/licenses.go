package operations

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
)

// storeLicense creates a license: 201 for a new one, 200 for a domain the
// consumer already held (answered, not stored: a retry tells the truth of
// its own time). The body is bound and validated once, before the key is
// reserved. The intent is on the record as started before the vendor hears
// of it, and the license row commits with the record's completion and the
// supersession of the consumer's older open intents for the domain. A
// pending create is finished by finding the vendor's site for the domain.
func storeLicense(svc *licenses.Service) idempotency.Operation[licenses.Input] {
	return idempotency.Operation[licenses.Input]{
		Name: "licenses.store",
		Bind: func(c echo.Context, body []byte) (licenses.Input, []byte, error) {
			return request.BindStoreLicense(c.Request().Header.Get(echo.HeaderContentType), body)
		},
		Subject: func(in licenses.Input) string { return in.Domain },
		Run: func(ctx context.Context, call idempotency.Call, in licenses.Input) (idempotency.Response, idempotency.Outcome, error) {
			steps, kept := licenseSteps(call, call.Started)
			lic, created, err := svc.Create(requestActor(ctx, call), call.ConsumerID, in, steps)
			if err != nil {
				return idempotency.Response{}, idempotency.Outcome{}, err
			}
			resp, err := resource.LicenseCreated(lic, created)
			o := licenseOutcome(lic)
			o.Kept, o.NoEffect = *kept, !created
			return resp, o, err
		},
		Resume: func(ctx context.Context, call idempotency.Call, rec *idempotency.Record, mayCreate bool) (idempotency.Resumption, error) {
			in, err := request.StoredStoreLicense(rec.RequestBody)
			if err != nil {
				return idempotency.Resumption{}, fmt.Errorf("%w: stored request: %w", idempotency.ErrAbandon, err)
			}
			steps, kept := licenseSteps(call, call.Started) // checked again before a create: the claim may have been superseded
			lic, created, found, err := svc.Resume(reconcilerActor(ctx, rec), rec.ConsumerID, in, mayCreate, steps)
			var invalid *licenses.ValidationError
			switch {
			case errors.Is(err, licenses.ErrMadeByAnother):
				return idempotency.Resumption{}, fmt.Errorf("%w: %w", idempotency.ErrSuperseded, err)
			case errors.As(err, &invalid) || errors.Is(err, licenses.ErrDomainTaken) || errors.Is(err, licenses.ErrVendorRejected):
				return idempotency.Resumption{}, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			case err != nil || !found:
				return idempotency.Resumption{}, err
			}
			resp, err := resource.LicenseCreated(lic, created)
			if err != nil {
				return idempotency.Resumption{}, err
			}
			o := licenseOutcome(lic)
			o.Kept = *kept
			return idempotency.Resumption{Done: true, Response: resp, Outcome: o}, nil
		},
		// A create that may have reached the vendor may have left a site
		// there: before its intent is discarded, a site for its domain that
		// no license holds is deleted, so that nobody pays for it.
		BeforeDiscard: func(ctx context.Context, rec *idempotency.Record) error {
			if rec.Subject != nil { // the normalised domain
				_, err := svc.ClearSite(ctx, *rec.Subject)
				return err
			}
			in, err := request.StoredStoreLicense(rec.RequestBody)
			if err != nil {
				return fmt.Errorf("stored request: %w", err)
			}
			if in, err = licenses.Validate(in); err != nil {
				return fmt.Errorf("stored request: %w", err)
			}
			_, err = svc.ClearSite(ctx, in.Domain)
			return err
		},
	}
}

// licenseSteps are a create's recovery points on call: started, and the
// license row committing with the record's completion — the very response
// the create answers. *kept tells, once the create returned, whether the
// completion was committed with it.
func licenseSteps(call idempotency.Call, started func(context.Context) error) (licenses.Steps, *bool) {
	kept := new(bool)
	return licenses.Steps{
		IntentID: call.Intent(),
		Started:  started,
		Commit: func(tx *gorm.DB, lic licenses.License, created bool) error {
			resp, err := resource.LicenseCreated(lic, created)
			if err != nil {
				return err
			}
			return call.Complete(tx, resp, licenseOutcome(lic))
		},
		Committed: func() { *kept = call.Intent() != "" },
	}, kept
}

func licenseOutcome(lic licenses.License) idempotency.Outcome {
	return idempotency.Outcome{ResourceType: "license", ResourceID: lic.ID, ExternalRef: lic.VendorSiteID}
}

// revokeLicense revokes a license: 204, and 204 again. The license's id is
// the key, so the revoke is on the record (started) before the vendor hears
// of it; the revocation commits with the record's completion and the
// supersession of the consumer's open creates for the domain, which can
// then never bring the license back. A delete is safe to repeat, so a
// pending one is resumed at once.
func revokeLicense(svc *licenses.Service, creates string) idempotency.Operation[string] {
	noContent := idempotency.Response{Status: http.StatusNoContent, Headers: map[string]string{}}
	steps := func(call idempotency.Call, started func(context.Context) error, kept *bool) licenses.Steps {
		return licenses.Steps{
			IntentID: call.Intent(),
			Started:  started,
			Commit: func(tx *gorm.DB, lic licenses.License, _ bool) error {
				if err := call.Complete(tx, noContent, idempotency.Outcome{ResourceType: "license", ResourceID: lic.ID}); err != nil {
					return err
				}
				return call.Supersede(tx, creates, lic.Domain)
			},
			Committed: func() { *kept = call.Intent() != "" },
		}
	}
	return idempotency.Operation[string]{
		Name: "licenses.destroy",
		// Deleting a site is safe to repeat, and the license stays revoking
		// until the revoke ends: a failed revoke is retried, never discarded.
		RetryOnly: true,
		Key:       func(c echo.Context) string { return c.Param("id") },
		Bind:      func(c echo.Context, _ []byte) (string, []byte, error) { return c.Param("id"), nil, nil },
		Run: func(ctx context.Context, call idempotency.Call, id string) (idempotency.Response, idempotency.Outcome, error) {
			var kept bool
			o := idempotency.Outcome{ResourceType: "license", ResourceID: id}
			if err := svc.Revoke(requestActor(ctx, call), call.ConsumerID, id, steps(call, call.Started, &kept)); err != nil {
				return idempotency.Response{}, o, err
			}
			o.Kept = kept
			return noContent, o, nil
		},
		Resume: func(ctx context.Context, call idempotency.Call, rec *idempotency.Record, _ bool) (idempotency.Resumption, error) {
			var kept bool
			err := svc.ResumeRevoke(reconcilerActor(ctx, rec), rec.ConsumerID, rec.Key, steps(call, nil, &kept))
			if errors.Is(err, licenses.ErrNotFound) {
				return idempotency.Resumption{}, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			}
			if err != nil {
				return idempotency.Resumption{}, err
			}
			return idempotency.Resumption{Done: true, Response: noContent,
				Outcome: idempotency.Outcome{ResourceType: "license", ResourceID: rec.Key, Kept: kept}}, nil
		},
	}
}
