package licenses

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Events of a license's audit trail: the vendor effects on it, and who
// caused them.
const (
	EventCreated    = "created"    // a new vendor site was made for it
	EventAdopted    = "adopted"    // the vendor's existing site for the domain was taken on
	EventReconciled = "reconciled" // recorded by the reconciler, finishing an intent whose outcome was unknown
	EventRevoked    = "revoked"    // the vendor's site was deleted
	EventFailed     = "failed"     // a revoke ended without effect; the license is active again
)

// Event is one entry of a license's audit trail, written in the same
// transaction as the change it records.
type Event struct {
	ID         uint64 `gorm:"primaryKey"`
	LicenseID  string
	ConsumerID string
	Event      string
	Actor      string  // ActorRequest, ActorReconciler or ActorVendor: never a value a client sent
	RequestID  *string // the request that caused it (correlation only), when one did
	TokenID    *string // the token that asked, when one did
	CreatedAt  time.Time
}

// TableName is the table events live in.
func (Event) TableName() string { return "license_events" }

// The actors of an audit trail: who made a change, as the server knows it.
const (
	// ActorRequest is an authenticated request, on behalf of its token.
	ActorRequest = "request"
	// ActorReconciler is the reconciler, finishing what a token once asked for.
	ActorReconciler = "reconciler"
)

// Actor is who causes a change: its kind (ActorRequest, ActorReconciler,
// ActorVendor), from the principal or the component that acts, never from
// anything a client sent; the request id rides along as correlation only.
type Actor struct {
	Name      string
	RequestID string
	TokenID   string
}

type actorKey struct{}

// WithActor returns ctx carrying the actor the audit trail names.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

func actorFrom(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	if a.Name == "" {
		a.Name = "unknown"
	}
	return a
}

// logEvent writes one event for lic within tx.
func (s *Service) logEvent(ctx context.Context, tx *gorm.DB, lic License, event string, at time.Time) error {
	a := actorFrom(ctx)
	e := Event{LicenseID: lic.ID, ConsumerID: lic.ConsumerID, Event: event, Actor: a.Name,
		RequestID: nonEmpty(a.RequestID), TokenID: nonEmpty(a.TokenID), CreatedAt: at}
	if err := tx.Create(&e).Error; err != nil {
		return fmt.Errorf("record license event: %w", err)
	}
	return nil
}

// Events returns the audit trail of the consumer's license, oldest first;
// anyone else's license is ErrNotFound.
func (s *Service) Events(ctx context.Context, consumerID, id string) ([]Event, error) {
	if _, err := s.find(ctx, consumerID, id); err != nil {
		return nil, err
	}
	var events []Event
	if err := s.read.WithContext(ctx).Where("license_id = ?", id).Order("id").Find(&events).Error; err != nil {
		return nil, fmt.Errorf("list license events: %w", err)
	}
	return events, nil
}
