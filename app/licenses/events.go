package licenses

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
)

// Events of a license's audit trail.
const (
	EventCreated    = "created"    // a new vendor site was made for it
	EventAdopted    = "adopted"    // the vendor's existing site for the domain was taken on
	EventReconciled = "reconciled" // recorded by the reconciler, finishing an intent whose outcome was unknown
	EventRevoked    = "revoked"    // the vendor's site was deleted
	EventFailed     = "failed"     // a revoke ended without effect; the license is active again
)

// Event is one entry of a license's audit trail, written in the change's
// transaction.
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
	ActorRequest    = "request"    // an authenticated request, on behalf of its token
	ActorReconciler = "reconciler" // the reconciler, finishing what a token once asked for
)

// Actor is who causes a change, from the principal or the component that
// acts, never from anything a client sent.
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

// consumerEvents are the consumer events of the audit events that change
// what a consumer sees: a failed revoke changed nothing, and has none.
var consumerEvents = map[string]string{
	EventCreated:     events.LicenseCreated,
	EventAdopted:     events.LicenseCreated,
	EventReconciled:  events.LicenseCreated,
	EventRevoked:     events.LicenseRevoked,
	EventSuspended:   events.LicenseSuspended,
	EventReactivated: events.LicenseReactivated,
	EventKeyRotated:  events.LicenseKeyRotated,
}

// publishes reports whether the audit event has a consumer event (the
// change's UPDATE then adds one to event_sequence).
func publishes(event string) bool { _, ok := consumerEvents[event]; return ok }

// logEvent writes, within tx, the audit event of a change and its consumer
// event if it has one (the outbox row). after is the license as the change
// left it, its key in plaintext and its EventSequence the UPDATE's.
func (s *Service) logEvent(ctx context.Context, tx *gorm.DB, after License, event string, at time.Time) error {
	ce, err := s.sealEvent(after, event, at)
	if err != nil {
		return err
	}
	return s.logSealed(actorFrom(ctx), tx, after, event, at, ce)
}

func (s *Service) sealEvent(after License, event string, at time.Time) (*events.Event, error) {
	typ, ok := consumerEvents[event]
	if !ok {
		return nil, nil
	}
	e, err := s.cfg.Events.Seal(events.Draft{ConsumerID: after.ConsumerID, Type: typ, SubjectID: after.ID,
		Sequence: after.EventSequence, Data: events.LicenseData{License: after.Resource()}, At: at})
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// logSealed is logEvent by a, its consumer event sealed (nil: none).
func (s *Service) logSealed(a Actor, tx *gorm.DB, after License, event string, at time.Time, ce *events.Event) error {
	if ce != nil {
		if err := s.cfg.Events.Insert(tx, ce); err != nil {
			return err
		}
	}
	e := Event{LicenseID: after.ID, ConsumerID: after.ConsumerID, Event: event, Actor: a.Name,
		RequestID: nonEmpty(a.RequestID), TokenID: nonEmpty(a.TokenID), CreatedAt: at}
	if err := tx.Create(&e).Error; err != nil {
		return fmt.Errorf("record license event: %w", err)
	}
	return nil
}

// openForEvent opens the key of the license an event carries, in place. A
// change needs no key (a revoke works when none opens it), nor does its
// event: it carries an empty license_key, and the license's id is logged at
// Warn (`licensor keys status` counts such keys).
func (s *Service) openForEvent(ctx context.Context, lic *License) {
	if err := s.open(lic); err != nil {
		s.cfg.Log.WarnContext(ctx, "license event without its key: no configured key opens it", "license_id", lic.ID)
		lic.LicenseKey = ""
	}
}

// Events returns the audit trail of the consumer's license, oldest first;
// anyone else's license is ErrNotFound.
func (s *Service) Events(ctx context.Context, consumerID, id string) ([]Event, error) {
	if _, err := s.find(ctx, consumerID, id); err != nil {
		return nil, err
	}
	var events []Event
	if err := s.cfg.Read.WithContext(ctx).Where("license_id = ?", id).Order("id").Find(&events).Error; err != nil {
		return nil, fmt.Errorf("list license events: %w", err)
	}
	return events, nil
}
