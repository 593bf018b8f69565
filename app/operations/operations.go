// Package operations declares licensor's guarded writes, each once: its
// name, its phases and how a pending one is resumed. Adding a guarded
// operation is one declaration here and its route in app/http.
package operations

import (
	"context"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// Set is the application's guarded operations, typed by their input.
type Set struct {
	StoreLicense     idempotency.Operation[licenses.Input]       // POST /api/licenses
	RevokeLicense    idempotency.Operation[string]               // DELETE /api/licenses/{id}, by the license's id
	RotateLicenseKey idempotency.Operation[string]               // POST /api/licenses/{id}/rotate-key, about the license's id
	VendorEvent      idempotency.Operation[licenses.VendorEvent] // a vendor webhook event, once per event id
}

// New declares the operations on the licenses service they run.
func New(svc *licenses.Service) Set {
	store, rotate := storeLicense(svc), rotateKey(svc)
	return Set{
		StoreLicense:     store,
		RevokeLicense:    revokeLicense(svc, store.Name, rotate.Name), // a revoke supersedes the open creates for its domain and rotations of its license
		RotateLicenseKey: rotate,
		VendorEvent:      vendorEvent(svc),
	}
}

// List is every operation of the set, for the guard, the reconciler and
// the metrics.
func (s Set) List() []idempotency.AnyOperation {
	return []idempotency.AnyOperation{s.StoreLicense, s.RevokeLicense, s.RotateLicenseKey, s.VendorEvent}
}

// requestActor names c's request and token as the actor in the audit trail.
func requestActor(ctx context.Context, c idempotency.Caller) context.Context {
	return licenses.WithActor(ctx, licenses.Actor{Name: licenses.ActorRequest, RequestID: c.RequestID, TokenID: c.TokenID})
}

// reconcilerActor names the reconciler as the actor, on behalf of the
// record's token and request.
func reconcilerActor(ctx context.Context, c idempotency.Caller) context.Context {
	return licenses.WithActor(ctx, licenses.Actor{Name: licenses.ActorReconciler, RequestID: c.RequestID, TokenID: c.TokenID})
}
