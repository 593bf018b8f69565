package auth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/tests/testdb"
)

// clock is a settable clock for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func lastUsed(t *testing.T, s *Service, id string) *time.Time {
	t.Helper()
	var tok Token
	if err := s.db.Where("id = ?", id).Take(&tok).Error; err != nil {
		t.Fatal(err)
	}
	return tok.LastUsedAt
}

// waitLastUsed polls until last_used_at equals want, or fails at the deadline.
func waitLastUsed(t *testing.T, s *Service, id string, want time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := lastUsed(t, s, id); got != nil && got.Equal(want) {
			return
		}
		<-time.After(5 * time.Millisecond)
	}
	t.Fatalf("last_used_at = %v, want %v", lastUsed(t, s, id), want)
}

func TestLastUsedAtIsWrittenAtMostOncePerMinute(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
		s := NewService(db.Gorm, make([]byte, 32), "iss", time.Hour, nil, clk.now)
		ctx := context.Background()
		issued, err := s.Issue(ctx, IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Verify(ctx, issued.Secret); err != nil {
			t.Fatal(err)
		}
		first := clk.now()
		waitLastUsed(t, s, issued.ID, first)

		clk.add(30 * time.Second)
		if _, err := s.Verify(ctx, issued.Secret); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		touched := s.touched[issued.ID]
		s.mu.Unlock()
		if !touched.Equal(first) {
			t.Fatalf("a use 30s later scheduled a write (touched %v)", touched)
		}

		clk.add(31 * time.Second)
		if _, err := s.Verify(ctx, issued.Secret); err != nil {
			t.Fatal(err)
		}
		waitLastUsed(t, s, issued.ID, clk.now())
	})
}

func TestExpiredRowRefusedEvenWithLiveJWT(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := &clock{t: time.Now()}
		s := NewService(db.Gorm, make([]byte, 32), "iss", time.Hour, nil, clk.now)
		ctx := context.Background()
		issued, err := s.Issue(ctx, IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}})
		if err != nil {
			t.Fatal(err)
		}
		// The row expires earlier than the JWT says (an admin shortened it).
		if err := db.Gorm.Model(&Token{}).Where("id = ?", issued.ID).Update("expires_at", clk.now().Add(-time.Second).UTC()).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := s.Verify(ctx, issued.Secret); err != ErrUnauthenticated {
			t.Fatalf("Verify = %v, want ErrUnauthenticated", err)
		}
	})
}

func TestTouchedMemoryStaysBounded(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	s := NewService(testdb.New(t, "sqlite").Gorm, make([]byte, 32), "iss", time.Hour, nil, clk.now)
	for i := range maxTouched {
		s.touched[fmt.Sprint("stale-", i)] = clk.now()
	}
	clk.add(2 * touchEvery)
	s.touch(Token{ID: "fresh"}, clk.now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.touched) != 1 {
		t.Errorf("%d entries remembered, want only the fresh one", len(s.touched))
	}
}
