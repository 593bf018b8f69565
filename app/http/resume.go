package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// LicenseResumer finishes pending "licenses.store" intents for the
// reconciler: it finds the vendor's site by the domain, records the license,
// and answers what POST /api/licenses would have answered.
type LicenseResumer struct {
	Licenses *licenses.Service
}

var _ idempotency.Resumer = LicenseResumer{}

// Resume implements idempotency.Resumer.
func (r LicenseResumer) Resume(ctx context.Context, rec *idempotency.Record, mayCreate bool) (idempotency.Resumption, error) {
	var req storeLicenseRequest
	if err := json.Unmarshal(rec.RequestBody, &req); err != nil {
		return idempotency.Resumption{}, fmt.Errorf("%w: stored request: %w", idempotency.ErrAbandon, err)
	}
	lic, created, found, err := r.Licenses.Resume(ctx, rec.ConsumerID, licenses.Input{Name: req.Name, Domain: req.Domain}, mayCreate)
	var invalid *licenses.ValidationError
	if errors.As(err, &invalid) || errors.Is(err, licenses.ErrDomainTaken) || errors.Is(err, licenses.ErrVendorRejected) {
		return idempotency.Resumption{}, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
	}
	if err != nil || !found {
		return idempotency.Resumption{}, err
	}
	resp, err := licenseResponse(lic, created)
	if err != nil {
		return idempotency.Resumption{}, err
	}
	return idempotency.Resumption{Done: true, Response: resp, Outcome: licenseOutcome(lic)}, nil
}
