package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A console session is its row and its token's: another token's session,
// a session past its end, one ended, and one whose row was swept by a later
// sign-in are all refused.
func TestConsoleSessionNeedsItsRow(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		s := newTestService(db, clk, nil)
		mine, other := issue(t, s, "ops"), issue(t, s, "ops")
		p := Principal{TokenID: mine.ID, ConsumerID: mine.ConsumerID}
		id, err := s.OpenSession(ctx, p, clk.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Session(ctx, id, mine.ID, mine.ConsumerID); err != nil {
			t.Fatalf("the open session: %v", err)
		}
		for name, tc := range map[string][3]string{
			"another token's":    {id, other.ID, other.ConsumerID},
			"no such session":    {"01NOSUCHSESSION00000000000", mine.ID, mine.ConsumerID},
			"another consumer's": {id, mine.ID, "01NOSUCHCONSUMER0000000000"},
		} {
			if _, err := s.Session(ctx, tc[0], tc[1], tc[2]); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("%s: %v, want ErrUnauthenticated", name, err)
			}
		}
		clk.Advance(time.Hour)
		if _, err := s.Session(ctx, id, mine.ID, mine.ConsumerID); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("past its end: %v", err)
		}
		if _, err := s.OpenSession(ctx, p, clk.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		var left int64
		if err := db.Gorm.Model(&ConsoleSession{}).Where("id = ?", id).Count(&left).Error; err != nil || left != 0 {
			t.Errorf("the ended session's row is kept (%d, %v) after a sign-in", left, err)
		}

		id, _ = s.OpenSession(ctx, p, clk.Now().Add(time.Hour))
		if err := s.EndSession(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Session(ctx, id, mine.ID, mine.ConsumerID); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("ended: %v", err)
		}
		if err := s.EndSession(ctx, id); err != nil {
			t.Errorf("ending it again: %v", err)
		}
	})
}
