package resource

import (
	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/events"
)

// TokenEvent is an event of the tokens' audit trail (GET /api/tokens/events,
// and `licensor token events --json`): which token, what happened to it,
// and who did it. A nil pointer is JSON null.
type TokenEvent struct {
	ID            uint64  `json:"id"`
	Event         string  `json:"event"`    // audit.TokenIssued or audit.TokenRevoked
	TokenID       string  `json:"token_id"` // the token the event is about
	Consumer      *string `json:"consumer"` // its consumer's name; null when not on record
	Actor         string  `json:"actor"`    // audit.ActorToken or audit.ActorConsole
	ActorTokenID  *string `json:"actor_token_id"`
	ActorConsumer *string `json:"actor_consumer"`
	RequestID     *string `json:"request_id"` // correlation only
	CreatedAt     string  `json:"created_at"`
}

// NewTokenEvent is e, of a token whose consumer is named consumer, done by
// a token whose consumer is named actorConsumer ("" for none: null).
func NewTokenEvent(e audit.Event, consumer, actorConsumer string) TokenEvent {
	return TokenEvent{
		ID: e.ID, Event: e.Event, TokenID: e.SubjectID, Consumer: StringOrNil(consumer),
		Actor: e.Actor, ActorTokenID: e.ActorTokenID, ActorConsumer: StringOrNil(actorConsumer),
		RequestID: e.RequestID, CreatedAt: events.Time(e.CreatedAt),
	}
}

// IntentEvent is an event of an intent's audit trail: a TokenEvent's shape,
// with the reason an operator gave (a discard's) or a reconciler's attempt's.
type IntentEvent struct {
	ID            uint64  `json:"id"`
	Event         string  `json:"event"`     // audit.IntentAttempted, audit.IntentRetried or audit.IntentDiscarded
	IntentID      string  `json:"intent_id"` // the intent the event is about
	Consumer      *string `json:"consumer"`  // its consumer's name; null when not on record
	Actor         string  `json:"actor"`     // audit.ActorToken, audit.ActorConsole or audit.ActorReconciler
	ActorTokenID  *string `json:"actor_token_id"`
	ActorConsumer *string `json:"actor_consumer"`
	RequestID     *string `json:"request_id"` // correlation only
	Reason        *string `json:"reason"`
	CreatedAt     string  `json:"created_at"`
}

// NewIntentEvents presents an intent's trail, its consumer named consumer,
// the acting tokens' consumers named by consumerNames (id → name).
func NewIntentEvents(trail []audit.Event, consumer string, consumerNames map[string]string) []IntentEvent {
	return list(trail, func(e audit.Event) IntentEvent {
		actorConsumer := ""
		if e.ActorConsumerID != nil {
			actorConsumer = consumerNames[*e.ActorConsumerID]
		}
		return IntentEvent{
			ID: e.ID, Event: e.Event, IntentID: e.SubjectID, Consumer: StringOrNil(consumer),
			Actor: e.Actor, ActorTokenID: e.ActorTokenID, ActorConsumer: StringOrNil(actorConsumer),
			RequestID: e.RequestID, Reason: e.Reason, CreatedAt: events.Time(e.CreatedAt),
		}
	})
}
