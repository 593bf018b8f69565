package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

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
	ctx = reconcilerActor(ctx, rec)
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

// reconcilerActor names the reconciler, on behalf of the token that asked,
// in the audit trail of what it does for rec.
func reconcilerActor(ctx context.Context, rec *idempotency.Record) context.Context {
	a := licenses.Actor{Name: licenses.ActorReconciler}
	if rec.RequestedBy != nil {
		a.TokenID = *rec.RequestedBy
	}
	return licenses.WithActor(ctx, a)
}

// RevokeResumer finishes "licenses.destroy" intents for the reconciler: a
// revoke whose outcome was unknown, or whose process died mid-call. A delete
// is safe to repeat, so it needs no settle time.
type RevokeResumer struct {
	Licenses *licenses.Service
}

var _ idempotency.Resumer = RevokeResumer{}

// Resume implements idempotency.Resumer; the record's key is the license id.
func (r RevokeResumer) Resume(ctx context.Context, rec *idempotency.Record, _ bool) (idempotency.Resumption, error) {
	err := r.Licenses.ResumeRevoke(reconcilerActor(ctx, rec), rec.ConsumerID, rec.Key)
	if errors.Is(err, licenses.ErrNotFound) {
		return idempotency.Resumption{}, fmt.Errorf("%w: %w", idempotency.ErrAbandon, err)
	}
	if err != nil {
		return idempotency.Resumption{}, err
	}
	return idempotency.Resumption{
		Done:     true,
		Response: idempotency.Response{Status: http.StatusNoContent, Headers: map[string]string{}},
		Outcome:  idempotency.Outcome{ResourceType: "license", ResourceID: rec.Key},
	}, nil
}
