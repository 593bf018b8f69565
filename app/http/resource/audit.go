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
