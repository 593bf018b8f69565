package operations

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/http/request"
	"github.com/licensor-api/licensor/app/http/resource"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// storeLicense creates a license: 201 for a new one, 200 for a domain the
// consumer already held. The body is bound and validated once, before the
// key is reserved; a pending create is finished by finding the vendor's
// site for the domain.
func storeLicense(svc *licenses.Service) idempotency.Operation[licenses.Input] {
	return idempotency.Operation[licenses.Input]{
		Name: "licenses.store",
		Bind: func(c echo.Context, body []byte) (licenses.Input, []byte, error) {
			return request.BindStoreLicense(c.Request().Header.Get(echo.HeaderContentType), body)
		},
		Run: func(ctx context.Context, call idempotency.Call, in licenses.Input) (idempotency.Response, idempotency.Outcome, error) {
			lic, created, err := svc.Create(requestActor(ctx, call), call.ConsumerID, in)
			if err != nil {
				return idempotency.Response{}, idempotency.Outcome{}, err
			}
			resp, err := resource.LicenseCreated(lic, created)
			return resp, licenseOutcome(lic), err
		},
		Resume: func(ctx context.Context, rec *idempotency.Record, mayCreate bool) (idempotency.Resumption, error) {
			in, err := request.StoredStoreLicense(rec.RequestBody)
			if err != nil {
				return idempotency.Resumption{}, fmt.Errorf("%w: stored request: %w", idempotency.ErrAbandon, err)
			}
			lic, created, found, err := svc.Resume(reconcilerActor(ctx, rec), rec.ConsumerID, in, mayCreate)
			var invalid *licenses.ValidationError
			if errors.As(err, &invalid) || errors.Is(err, licenses.ErrDomainTaken) || errors.Is(err, licenses.ErrVendorRejected) {
				return idempotency.Resumption{}, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			}
			if err != nil || !found {
				return idempotency.Resumption{}, err
			}
			resp, err := resource.LicenseCreated(lic, created)
			if err != nil {
				return idempotency.Resumption{}, err
			}
			return idempotency.Resumption{Done: true, Response: resp, Outcome: licenseOutcome(lic)}, nil
		},
	}
}

func licenseOutcome(lic licenses.License) idempotency.Outcome {
	return idempotency.Outcome{ResourceType: "license", ResourceID: lic.ID, ExternalRef: lic.VendorSiteID}
}

// revokeLicense revokes a license: 204, and 204 again. The license's id is
// the key, so the revoke is on the record before the vendor hears of it; a
// delete is safe to repeat, so a pending one is resumed at once.
func revokeLicense(svc *licenses.Service) idempotency.Operation[string] {
	noContent := idempotency.Response{Status: http.StatusNoContent, Headers: map[string]string{}}
	return idempotency.Operation[string]{
		Name: "licenses.destroy",
		Key:  func(c echo.Context) string { return c.Param("id") },
		Bind: func(c echo.Context, _ []byte) (string, []byte, error) { return c.Param("id"), nil, nil },
		Run: func(ctx context.Context, call idempotency.Call, id string) (idempotency.Response, idempotency.Outcome, error) {
			o := idempotency.Outcome{ResourceType: "license", ResourceID: id}
			if err := svc.Revoke(requestActor(ctx, call), call.ConsumerID, id); err != nil {
				return idempotency.Response{}, o, err
			}
			return noContent, o, nil
		},
		Resume: func(ctx context.Context, rec *idempotency.Record, _ bool) (idempotency.Resumption, error) {
			err := svc.ResumeRevoke(reconcilerActor(ctx, rec), rec.ConsumerID, rec.Key)
			if errors.Is(err, licenses.ErrNotFound) {
				return idempotency.Resumption{}, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
			}
			if err != nil {
				return idempotency.Resumption{}, err
			}
			return idempotency.Resumption{Done: true, Response: noContent,
				Outcome: idempotency.Outcome{ResourceType: "license", ResourceID: rec.Key}}, nil
		},
	}
}
