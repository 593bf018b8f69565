// Package operations declares licensor's guarded writes, each once: its
// name, its phases (what runs before the vendor may hear of it, the vendor
// call, and the last transaction that commits the effect with its answer),
// and how a pending one is resumed. The bootstrap hands the one list
// (Set.List) to the guard, the reconciler and the metrics, and the Set to
// app/http, whose routes bind their input and serve them. Adding a guarded
// operation is one declaration here and its route.
package operations

import (
	"context"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// Set is the application's guarded operations, typed by their input.
type Set struct {
	// StoreLicense is POST /api/licenses: "licenses.store".
	StoreLicense idempotency.Operation[licenses.Input]
	// RevokeLicense is DELETE /api/licenses/{id}: "licenses.destroy", keyed
	// by the license's id.
	RevokeLicense idempotency.Operation[string]
	// RotateLicenseKey is POST /api/licenses/{id}/rotate-key:
	// "licenses.rotate_key", about the license's id.
	RotateLicenseKey idempotency.Operation[string]
	// VendorEvent applies one of the vendor's webhook events, once per event
	// id: "webhooks.vendor".
	VendorEvent idempotency.Operation[licenses.VendorEvent]
}

// New declares the operations on the licenses service they run.
func New(svc *licenses.Service) Set {
	store := storeLicense(svc)
	return Set{
		StoreLicense:     store,
		RevokeLicense:    revokeLicense(svc, store.Name), // a revoke supersedes the open creates for its domain
		RotateLicenseKey: rotateKey(svc),
		VendorEvent:      vendorEvent(svc),
	}
}

// List is every operation of the set, as the guard, the reconciler and the
// metrics take them.
func (s Set) List() []idempotency.AnyOperation {
	return []idempotency.AnyOperation{s.StoreLicense, s.RevokeLicense, s.RotateLicenseKey, s.VendorEvent}
}

// requestActor names the request and its token as the actor of what the
// licenses service records for c.
func requestActor(ctx context.Context, c idempotency.Caller) context.Context {
	return licenses.WithActor(ctx, licenses.Actor{Name: licenses.ActorRequest, RequestID: c.RequestID, TokenID: c.TokenID})
}

// reconcilerActor names the reconciler, on behalf of the token that asked
// and with its request's id (the record's, as the reconciler's caller
// carries them), in the audit trail of what it does.
func reconcilerActor(ctx context.Context, c idempotency.Caller) context.Context {
	return licenses.WithActor(ctx, licenses.Actor{Name: licenses.ActorReconciler, RequestID: c.RequestID, TokenID: c.TokenID})
}
