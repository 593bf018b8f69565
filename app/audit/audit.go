// Package audit is the trail of administration: tokens, intents and
// webhook deliveries, who changed them and why. A change writes its event
// (Record) in its own transaction, so the trail and the change never
// disagree. The actor is the server's knowledge of who acted, never a value
// a client sent; a request id rides along as correlation only.
package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/ptr"
)

// Events of the trail.
const (
	TokenIssued     = "token.issued"     // a token was issued
	TokenRevoked    = "token.revoked"    // a live token was revoked
	IntentRetried   = "intent.retried"   // a failed intent was put back to pending
	IntentDiscarded = "intent.discarded" // a failed or abandoned intent was settled for good
	IntentAttempted = "intent.attempted" // one reconciler attempt; its reason says what came of it

	WebhookDeliveryRetried = "webhook_delivery.retried" // a webhook delivery made due again by hand
)

// What an event is about (Event.SubjectType); Event.SubjectID is the
// token's id, the intent's public id or the webhook delivery's id.
const (
	SubjectToken           = "token"
	SubjectIntent          = "intent"
	SubjectWebhookDelivery = "webhook_delivery"
)

// Who acted (Actor.Kind, Event.Actor).
const (
	ActorToken      = "token"      // an API call, on behalf of the token that authenticated it
	ActorConsole    = "console"    // an operator at the command line, who holds no token
	ActorReconciler = "reconciler" // the reconciler on its own schedule: no token, no request
)

// Actor is who makes a change (ByToken, Console or Reconciler), passed to
// the service that makes it.
type Actor struct {
	Kind       string // ActorToken, ActorConsole or ActorReconciler
	ConsumerID string // the acting token's consumer; "" for the console and the reconciler
	TokenID    string // the acting token; "" for the console and the reconciler
	RequestID  string // the request's id, correlation only; "" for none
}

// ByToken is an API call made with the token tokenID of the consumer
// consumerID, in the request requestID.
func ByToken(consumerID, tokenID, requestID string) Actor {
	return Actor{Kind: ActorToken, ConsumerID: consumerID, TokenID: tokenID, RequestID: requestID}
}

// Console is the operator at the command line.
func Console() Actor { return Actor{Kind: ActorConsole} }

// Reconciler is the reconciler: it takes no argument, so nothing a request
// carried can make it up.
func Reconciler() Actor { return Actor{Kind: ActorReconciler} }

// ErrNoActor is Check's refusal.
var ErrNoActor = errors.New("audit: the change names no actor the server knows")

// Check reports ErrNoActor unless a is a token with its token id, or the
// console or the reconciler with nothing else.
func (a Actor) Check() error {
	switch {
	case a.Kind == ActorToken && a.TokenID != "":
		return nil
	case (a.Kind == ActorConsole || a.Kind == ActorReconciler) && a.TokenID == "" && a.ConsumerID == "" && a.RequestID == "":
		return nil
	}
	return ErrNoActor
}

// Event is a row of audit_events.
type Event struct {
	ID              uint64 `gorm:"primaryKey"`
	Event           string
	SubjectType     string
	SubjectID       string
	Actor           string  // ActorToken, ActorConsole or ActorReconciler
	ActorConsumerID *string // the acting token's consumer, for ActorToken
	ActorTokenID    *string // the acting token, for ActorToken
	RequestID       *string // the request's id (correlation only), for ActorToken
	Reason          *string // why, when the change takes one (a discard), or what came of it (an attempt)
	CreatedAt       time.Time
}

// TableName is the table events live in.
func (Event) TableName() string { return "audit_events" }

// Change is what an event records ("" Reason for none).
type Change struct {
	Event       string
	SubjectType string
	SubjectID   string
	Reason      string
}

// Record writes the event of change, made by by at at, in tx: the change's
// own transaction.
func Record(tx *gorm.DB, by Actor, change Change, at time.Time) error {
	if err := by.Check(); err != nil {
		return err
	}
	e := Event{Event: change.Event, SubjectType: change.SubjectType, SubjectID: change.SubjectID, Actor: by.Kind,
		ActorConsumerID: ptr.OrNil(by.ConsumerID), ActorTokenID: ptr.OrNil(by.TokenID), RequestID: ptr.OrNil(by.RequestID),
		Reason: ptr.OrNil(change.Reason), CreatedAt: dbtime.Stamp(at)}
	if err := tx.Create(&e).Error; err != nil {
		return fmt.Errorf("record audit event %s: %w", change.Event, err)
	}
	return nil
}

// Filter selects events of one subject type.
type Filter struct {
	SubjectType   string // required
	SubjectID     string // one subject's events; "" for every subject of the type
	NewestFirst   bool   // by id, the order they were written in; else oldest first
	Page, PerPage int    // Page from 1; PerPage 0 lists every event
}

// List returns the events f selects, in its order, and how many it selects
// in all.
func List(ctx context.Context, db *gorm.DB, f Filter) ([]Event, int64, error) {
	q := db.WithContext(ctx).Model(&Event{}).Where("subject_type = ?", f.SubjectType)
	if f.SubjectID != "" {
		q = q.Where("subject_id = ?", f.SubjectID)
	}
	order := "id"
	if f.NewestFirst {
		order = "id DESC"
	}
	var total int64
	if f.PerPage > 0 {
		if err := q.Count(&total).Error; err != nil {
			return nil, 0, fmt.Errorf("count audit events: %w", err)
		}
		q = q.Offset((max(f.Page, 1) - 1) * f.PerPage).Limit(f.PerPage)
	}
	var events []Event
	if err := q.Order(order).Find(&events).Error; err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	if f.PerPage <= 0 {
		total = int64(len(events))
	}
	return events, total, nil
}
