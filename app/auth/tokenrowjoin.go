package auth

import (
	"context"
	"strings"

	"github.com/licensor-api/licensor/database"
)

// TokenRowJoin is a read of one row of another table made in the token row's
// statement, for a request that would read it next (a retry's idempotency
// record): one round trip instead of two, and both rows from one snapshot.
type TokenRowJoin interface {
	// Join is the columns the read adds and its LEFT JOIN on the token row,
	// aliased t, of which they may name t.consumer_id only. Each text is
	// prepared once, so what varies goes in Args.
	Join() (columns, join string)
	// Args are the join's arguments, in the order its text names them.
	Args() []any
	// Dest is where the columns are scanned; a row not found scans as NULLs.
	Dest() []any
}

// OptionalJoin is a TokenRowJoin that may be left out: Needed is asked,
// once the token's signature holds, with the consumer the token claims
// (which its row must then confirm, or the token is refused); false reads
// the token row alone, and the join's Dest is not scanned.
type OptionalJoin interface {
	TokenRowJoin
	Needed(consumerID string) bool
}

// VerifyWith is Verify, with j read in the token row's statement once the
// signature holds. j's columns are scanned whatever the token row says: use
// them only when VerifyWith succeeds.
func (s *Service) VerifyWith(ctx context.Context, raw string, j TokenRowJoin) (Principal, error) {
	c, err := s.claims(raw)
	if err != nil {
		return Principal{}, err
	}
	return s.session(ctx, c.id, c.subject, j)
}

// joinedQuery is the token row's statement with j's join, prepared once per
// join text. The lookup neither builds the text nor allocates: it is on
// every keyed request.
func (s *Service) joinedQuery(j TokenRowJoin) *database.Query {
	columns, join := j.Join()
	key := joinKey{columns: columns, join: join}
	s.joinedMu.RLock()
	q := s.joined[key]
	s.joinedMu.RUnlock()
	if q != nil {
		return q
	}
	s.joinedMu.Lock()
	defer s.joinedMu.Unlock()
	if q = s.joined[key]; q == nil {
		q = database.NewQuery(s.read, joinedText(columns, join))
		s.joined[key] = q
	}
	return q
}

type joinKey struct{ columns, join string }

// joinedText is tokenRowQuery with a join's columns and LEFT JOIN added.
func joinedText(columns, join string) string {
	sel, from, _ := strings.Cut(tokenRowQuery, "\nFROM ")
	from, where, _ := strings.Cut(from, " WHERE ")
	return sel + ", " + columns + "\nFROM " + from + " " + join + " WHERE " + where
}
