package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/licensor-api/licensor/database"
)

// Session returns the principal of the token with that id, for a caller
// that holds it already verified: Verify, once the token string's signature
// holds, and a session opened with it (the operator console's). The token
// row is read on every call, so a session ends on the request after its
// token is revoked or expires. consumerID is the token's subject; a row of
// another consumer is no token of it. Every refusal is ErrUnauthenticated.
// A success records the token's use in memory (see Verify).
func (s *Service) Session(ctx context.Context, tokenID, consumerID string) (Principal, error) {
	return s.session(ctx, tokenID, consumerID, nil)
}

// session is Session, with j read in the token row's statement (VerifyWith).
func (s *Service) session(ctx context.Context, tokenID, consumerID string, j Joined) (Principal, error) {
	tok, err := s.loadToken(ctx, tokenID, j)
	if errors.Is(err, database.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("load token: %w", err)
	}
	now := s.now()
	if tok.ConsumerID != consumerID || !tok.Live(now) {
		return Principal{}, ErrUnauthenticated
	}
	s.recordUse(tok, now)
	return Principal{ConsumerID: tok.ConsumerID, Consumer: tok.Consumer.Name, TokenID: tok.ID, Abilities: tok.Abilities,
		ExpiresAt: tok.ExpiresAt}, nil
}
