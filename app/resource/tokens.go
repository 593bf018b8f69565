package resource

import (
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
)

// Token is a token as the API shows it (GET /api/tokens, and `licensor
// token list --json`): never its secret, except once, in the response that
// issues it. A nil pointer is JSON null.
type Token struct {
	ID         string         `json:"id"`
	Token      string         `json:"token,omitempty"` // the secret: set on the answer that issues it, and never again
	Consumer   string         `json:"consumer"`
	Name       string         `json:"name"`
	Abilities  auth.Abilities `json:"abilities"`
	IssuedBy   *string        `json:"issued_by"` // the token that issued it; null for the command line
	LastUsedAt *string        `json:"last_used_at"`
	ExpiresAt  string         `json:"expires_at"`
	RevokedAt  *string        `json:"revoked_at"`
	CreatedAt  string         `json:"created_at"`
}

// NewToken presents t, without its secret.
func NewToken(t auth.Token) Token {
	return Token{
		ID: t.ID, Consumer: t.Consumer.Name, Name: t.Name, Abilities: t.Abilities, IssuedBy: t.IssuedBy,
		LastUsedAt: TimeOrNil(t.LastUsedAt), ExpiresAt: events.Time(t.ExpiresAt), RevokedAt: TimeOrNil(t.RevokedAt), CreatedAt: events.Time(t.CreatedAt),
	}
}

// NewTokens presents toks.
func NewTokens(toks []auth.Token) []Token { return list(toks, NewToken) }

// NewTokenEvents presents events.
func NewTokenEvents(events []auth.TokenEvent) []TokenEvent {
	return list(events, func(e auth.TokenEvent) TokenEvent { return NewTokenEvent(e.Event, e.Consumer, e.ActorConsumer) })
}
