package auth

import (
	"context"
	"strings"

	"github.com/licensor-api/licensor/database"
)

// TokenRowJoin is a read of one row of another table made in the token row's
// statement, for a request that would read it next (a retry's idempotency
// record): one round trip instead of two, and both rows from one snapshot.
// VerifyWith makes it; the token is checked exactly as Verify checks it,
// and a caller uses what was read only once the token is verified.
type TokenRowJoin interface {
	// Join is what the read adds to the token row's statement: the columns
	// it reads, and a LEFT JOIN on the token row. The token row is aliased
	// t, and of it the join and the columns may name t.consumer_id only (the
	// consumer the token speaks for). The text is the same for every read of
	// a kind: each text is prepared once; what varies goes in Args.
	Join() (columns, join string)
	// Args are the join's arguments, in the order its text names them.
	Args() []any
	// Dest is where the columns are scanned, in their order. A row the
	// join does not find scans as NULLs.
	Dest() []any
}

// VerifyWith is Verify, with j read in the token row's statement when the
// token's signature holds (no statement is made for a token that fails it).
// j's columns are scanned whatever the token row says, so they may be used
// only when VerifyWith succeeds. A nil j is Verify.
func (s *Service) VerifyWith(ctx context.Context, raw string, j TokenRowJoin) (Principal, error) {
	c, err := s.claims(raw)
	if err != nil {
		return Principal{}, err
	}
	return s.session(ctx, c.id, c.subject, j)
}

// joinedQuery is the token row's statement with j's join: prepared once per
// join text, on the read pool. The lookup neither builds the text nor
// allocates: it is on every keyed request.
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

// joinKey names a TokenRowJoin's statement: its columns and its join.
type joinKey struct{ columns, join string }

// joinedText is tokenRowQuery with a join's columns and LEFT JOIN added.
func joinedText(columns, join string) string {
	sel, from, _ := strings.Cut(tokenRowQuery, "\nFROM ")
	from, where, _ := strings.Cut(from, " WHERE ")
	return sel + ", " + columns + "\nFROM " + from + " " + join + " WHERE " + where
}
