package resource

import "github.com/licensor-api/licensor/app/audit"

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
		RequestID: e.RequestID, CreatedAt: Time(e.CreatedAt),
	}
}

// IntentEvent is an event of an intent's audit trail (GET
// /api/intents/{id}/events): the shape of a TokenEvent, about an intent,
// with the reason the operator gave (a discard's), or what came of a
// reconciler's attempt (idempotency.Attempt's Reason); null otherwise.
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

// NewIntentEvents is each of events, of an intent whose consumer is named
// consumer, the acting tokens' consumers named by consumerNames (consumer
// id → name), in order; never nil, so that none is an empty JSON array.
func NewIntentEvents(events []audit.Event, consumer string, consumerNames map[string]string) []IntentEvent {
	return list(events, func(e audit.Event) IntentEvent {
		actorConsumer := ""
		if e.ActorConsumerID != nil {
			actorConsumer = consumerNames[*e.ActorConsumerID]
		}
		return IntentEvent{
			ID: e.ID, Event: e.Event, IntentID: e.SubjectID, Consumer: StringOrNil(consumer),
			Actor: e.Actor, ActorTokenID: e.ActorTokenID, ActorConsumer: StringOrNil(actorConsumer),
			RequestID: e.RequestID, Reason: e.Reason, CreatedAt: Time(e.CreatedAt),
		}
	})
}
