package auth

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// consumerJoin reads, with the token row, the name of the token's consumer
// when it is name: a TokenRowJoin on a table the tests have.
type consumerJoin struct {
	name  string
	got   sql.NullString
	dests int // how often Dest was asked: once per statement made
}

func (j *consumerJoin) Join() (string, string) {
	return "j.name", "LEFT JOIN consumers j ON j.id = t.consumer_id AND j.name = ?"
}
func (j *consumerJoin) Args() []any { return []any{j.name} }
func (j *consumerJoin) Dest() []any { j.dests++; return []any{&j.got} }

// VerifyWith reads the joined row in the token row's statement, on the
// token's consumer, scans NULL where the join finds none, checks the token
// as Verify does, and makes no statement for a token whose signature fails.
func TestVerifyWithReadsTheJoinedRowWithTheToken(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		s := newTestService(db, testkit.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)), nil)
		acme, other := issue(t, s, "acme"), issue(t, s, "other")

		j := &consumerJoin{name: "acme"}
		p, err := s.VerifyWith(ctx, acme.Secret, j)
		if err != nil || p.TokenID != acme.ID || p.Consumer != "acme" {
			t.Fatalf("VerifyWith = %+v, %v", p, err)
		}
		if !j.got.Valid || j.got.String != "acme" || j.dests != 1 {
			t.Errorf("joined = %+v after %d statements; want acme, read once", j.got, j.dests)
		}

		// The join is on the token's consumer: another consumer's row is not found.
		j = &consumerJoin{name: "acme"}
		if _, err := s.VerifyWith(ctx, other.Secret, j); err != nil {
			t.Fatal(err)
		}
		if j.got.Valid || j.dests != 1 {
			t.Errorf("the token of other read acme's row: %+v", j.got)
		}

		// A forged token makes no statement; a revoked one is refused though its row was read.
		j = &consumerJoin{name: "acme"}
		if _, err := s.VerifyWith(ctx, acme.Secret+"x", j); !errors.Is(err, ErrUnauthenticated) || j.dests != 0 {
			t.Errorf("forged: %v after %d statements", err, j.dests)
		}
		if err := s.Revoke(ctx, audit.Console(), acme.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.VerifyWith(ctx, acme.Secret, j); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("revoked: %v", err)
		}

		// Each join text is prepared once.
		if n := len(s.joined); n != 1 {
			t.Errorf("%d prepared joins, want 1", n)
		}
	})
}

func TestJoinedTextAddsTheJoinToTheTokenRowQuery(t *testing.T) {
	got := joinedText("k.a, k.b", "LEFT JOIN k ON k.x = t.consumer_id AND k.y = ?")
	want := `SELECT t.consumer_id, c.name, t.abilities, t.last_used_at, t.expires_at, t.revoked_at, k.a, k.b
FROM personal_access_tokens t INNER JOIN consumers c ON c.id = t.consumer_id LEFT JOIN k ON k.x = t.consumer_id AND k.y = ? WHERE t.id = ?`
	if got != want {
		t.Errorf("joinedText =\n%s\nwant\n%s", got, want)
	}
}
