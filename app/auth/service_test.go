package auth

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

func newTestService(db *testdb.DB, clk *testkit.Clock, log *slog.Logger) *Service {
	return New(Config{DB: db.Gorm, Key: make([]byte, 32), Issuer: "iss", DefaultTTL: time.Hour, Log: log, Now: clk.Now})
}

func issue(t *testing.T, s *Service, consumer string) Issued {
	t.Helper()
	issued, err := s.Issue(context.Background(), audit.Console(), IssueInput{Consumer: consumer, Abilities: []string{LicensesRead}})
	if err != nil {
		t.Fatal(err)
	}
	return issued
}

func verify(t *testing.T, s *Service, secret string) {
	t.Helper()
	if _, err := s.Verify(context.Background(), secret); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func flush(t *testing.T, s *Service) {
	t.Helper()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func wantPending(t *testing.T, s *Service, want int) {
	t.Helper()
	if got := s.Pending(); got != want {
		t.Fatalf("Pending() = %d, want %d", got, want)
	}
}

// lastUsed reads the token's last_used_at from the database.
func lastUsed(t *testing.T, db *testdb.DB, id string) *time.Time {
	t.Helper()
	var tok Token
	if err := db.Gorm.Where("id = ?", id).Take(&tok).Error; err != nil {
		t.Fatal(err)
	}
	return tok.LastUsedAt
}

func wantLastUsed(t *testing.T, db *testdb.DB, id string, want time.Time) {
	t.Helper()
	if got := lastUsed(t, db, id); got == nil || !got.Equal(want) {
		t.Fatalf("last_used_at = %v, want %v", got, want)
	}
}

// waitLastUsed polls until last_used_at equals want, or fails at the deadline.
func waitLastUsed(t *testing.T, db *testdb.DB, id string, want time.Time) {
	t.Helper()
	used := func() bool {
		got := lastUsed(t, db, id)
		return got != nil && got.Equal(want)
	}
	if !testkit.Poll(5*time.Second, used) {
		t.Fatalf("last_used_at = %v, want %v", lastUsed(t, db, id), want)
	}
}

// runWriter starts s.RunTouchWriter and returns a stop that cancels it and
// waits, with a deadline, for it to return. The test's end stops it too.
func runWriter(t *testing.T, s *Service) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunTouchWriter(ctx)
	}()
	stop = func() {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("RunTouchWriter did not return after its ctx was cancelled")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestLastUsedAtIsWrittenAtMostOncePerMinute(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		s := newTestService(db, clk, nil)
		issued := issue(t, s, "acme")

		verify(t, s, issued.Secret)
		if got := lastUsed(t, db, issued.ID); got != nil {
			t.Fatalf("last_used_at = %v after Verify, want NULL: Verify itself writes nothing", got)
		}
		wantPending(t, s, 1)
		flush(t, s)
		wantPending(t, s, 0)
		first := clk.Now()
		wantLastUsed(t, db, issued.ID, first)

		clk.Advance(30 * time.Second)
		verify(t, s, issued.Secret)
		wantPending(t, s, 0)
		flush(t, s)
		wantLastUsed(t, db, issued.ID, first)

		clk.Advance(31 * time.Second)
		verify(t, s, issued.Secret)
		verify(t, s, issued.Secret)
		wantPending(t, s, 1)
		flush(t, s)
		wantLastUsed(t, db, issued.ID, clk.Now())
	})
}

func TestRecentLastUsedAtInTheRowIsNotRewritten(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		s := newTestService(db, clk, nil)
		issued := issue(t, s, "acme")
		verify(t, s, issued.Secret)
		flush(t, s)
		first := clk.Now()

		// Another replica, whose memory is empty, reads the row's own
		// last_used_at.
		other := newTestService(db, clk, nil)
		clk.Advance(59 * time.Second)
		verify(t, other, issued.Secret)
		wantPending(t, other, 0)

		clk.Advance(time.Second)
		verify(t, other, issued.Secret)
		wantPending(t, other, 1)
		flush(t, other)
		wantLastUsed(t, db, issued.ID, first.Add(time.Minute))
	})
}

// The row is read on every Verify: a token whose row expired earlier than
// its JWT says (an admin shortened it), or was revoked, is refused on the
// next request, though its JWT still holds and was seen before.
func TestRowRefusesALiveJWT(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		s := newTestService(db, clk, nil)
		ctx := context.Background()
		for name, change := range map[string]func(Issued) error{
			"expired row": func(tok Issued) error {
				return db.Gorm.Model(&Token{}).Where("id = ?", tok.ID).Update("expires_at", clk.Now().Add(-time.Second).UTC()).Error
			},
			"revoked": func(tok Issued) error { return s.Revoke(ctx, audit.Console(), tok.ID) },
		} {
			issued := issue(t, s, "acme")
			verify(t, s, issued.Secret)
			if err := change(issued); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Verify(ctx, issued.Secret); err != ErrUnauthenticated {
				t.Errorf("%s: Verify = %v, want ErrUnauthenticated", name, err)
			}
		}
	})
}

// A token signed with this key under another APP_URL is a bare
// ErrUnauthenticated; the log says why at Debug, with both issuers and
// never the token, and says nothing above Debug.
func TestForeignIssuerLoggedAtDebug(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		other := New(Config{DB: db.Gorm, Key: make([]byte, 32), Issuer: "http://old.test", DefaultTTL: time.Hour, Now: clk.Now})
		issued := issue(t, other, "acme")
		for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
			var logs testkit.Buffer
			s := newTestService(db, clk, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level})))
			if _, err := s.Verify(context.Background(), issued.Secret); err != ErrUnauthenticated {
				t.Fatalf("Verify of a foreign issuer's token = %v, want ErrUnauthenticated", err)
			}
			got := logs.String()
			if level == slog.LevelInfo {
				if got != "" {
					t.Errorf("at Info the log shows %q, want nothing", got)
				}
				continue
			}
			for _, want := range []string{"level=DEBUG", `msg="token issuer does not match APP_URL"`, "iss=http://old.test", "expected=iss"} {
				if !strings.Contains(got, want) {
					t.Errorf("log lacks %s:\n%s", want, got)
				}
			}
			if sig := issued.Secret[strings.LastIndex(issued.Secret, ".")+1:]; strings.Contains(got, sig) || strings.Contains(got, issued.Secret) {
				t.Errorf("the log shows the token:\n%s", got)
			}
		}
		// A bad signature or an expired token of this issuer is no issuer problem.
		var logs testkit.Buffer
		s := newTestService(db, clk, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		own := issue(t, s, "acme")
		if _, err := s.Verify(context.Background(), own.Secret+"x"); err != ErrUnauthenticated {
			t.Fatalf("Verify of a bad signature = %v, want ErrUnauthenticated", err)
		}
		if strings.Contains(logs.String(), "issuer") {
			t.Errorf("a bad signature was logged as an issuer mismatch:\n%s", logs.String())
		}
	})
}

// With nobody writing, the recorded uses stop growing at the bound; a use
// that finds no room is recorded on a later use, once room is made.
func TestRecordedUsesStayBounded(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		logs := &testkit.Buffer{}
		s := newTestService(db, clk, slog.New(slog.NewTextHandler(logs, nil)))
		s.uses.limit = 3 // maxTouched, made small enough to reach
		var toks []Issued
		for i := range 5 {
			toks = append(toks, issue(t, s, fmt.Sprint("consumer-", i)))
		}

		for range 2 {
			for _, tok := range toks {
				verify(t, s, tok.Secret)
			}
			wantPending(t, s, 3)
		}
		flush(t, s)
		wantPending(t, s, 0)
		if !strings.Contains(logs.String(), "memory full") {
			t.Errorf("no warning about uses not recorded; logs:\n%s", logs)
		}
		var written, skipped []Issued
		for _, tok := range toks {
			if lastUsed(t, db, tok.ID) != nil {
				written = append(written, tok)
			} else {
				skipped = append(skipped, tok)
			}
		}
		if len(written) != 3 {
			t.Fatalf("%d tokens have last_used_at, want 3", len(written))
		}
		for _, tok := range written {
			wantLastUsed(t, db, tok.ID, clk.Now())
		}

		// The memory is full of writes that still throttle: no room yet.
		for _, tok := range skipped {
			verify(t, s, tok.Secret)
		}
		wantPending(t, s, 0)

		// A minute on, they no longer throttle anything and make room.
		clk.Advance(touchEvery)
		for _, tok := range skipped {
			verify(t, s, tok.Secret)
		}
		wantPending(t, s, 2)
		flush(t, s)
		for _, tok := range skipped {
			wantLastUsed(t, db, tok.ID, clk.Now())
		}
	})
}

func TestFailedWriteIsLoggedWithTokenID(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		logs := &testkit.Buffer{}
		s := newTestService(db, clk, slog.New(slog.NewTextHandler(logs, nil)))
		issued := issue(t, s, "acme")
		verify(t, s, issued.Secret)
		if err := db.Gorm.Exec("ALTER TABLE personal_access_tokens RENAME TO moved_tokens").Error; err != nil {
			t.Fatal(err)
		}
		err := s.Flush(context.Background())
		if err == nil || !strings.Contains(err.Error(), issued.ID) {
			t.Fatalf("Flush = %v, want an error naming token %s", err, issued.ID)
		}
		wantPending(t, s, 0) // forgotten: the token's next use records it again
		out := logs.String()
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "token_id="+issued.ID) {
			t.Errorf("no warning with the token id; logs:\n%s", out)
		}
		if strings.Contains(out, issued.Secret) {
			t.Errorf("the token string was logged:\n%s", out)
		}
	})
}

func TestRunTouchWriterFlushesWhenCancelled(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		s := newTestService(db, clk, nil)
		s.uses.interval = time.Hour // only the final write can write
		issued := issue(t, s, "acme")
		stop := runWriter(t, s)
		verify(t, s, issued.Secret)
		stop()
		wantPending(t, s, 0)
		wantLastUsed(t, db, issued.ID, clk.Now())
	})
}

func TestRunTouchWriterWritesPeriodically(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		s := newTestService(db, clk, nil)
		s.uses.interval = 10 * time.Millisecond
		issued := issue(t, s, "acme")
		runWriter(t, s)

		verify(t, s, issued.Secret)
		waitLastUsed(t, db, issued.ID, clk.Now())

		clk.Advance(touchEvery)
		verify(t, s, issued.Secret)
		waitLastUsed(t, db, issued.ID, clk.Now())
	})
}

// A token seen before skips the signature check, never the time claims: once
// its JWT has expired it is refused, even where its row would still let it in.
func TestCachedTokenStillExpires(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		s := newTestService(db, clk, nil)
		issued := issue(t, s, "acme")
		verify(t, s, issued.Secret) // checked and remembered
		verify(t, s, issued.Secret) // from memory
		if err := db.Gorm.Model(&Token{}).Where("id = ?", issued.ID).Update("expires_at", clk.Now().Add(365*24*time.Hour)).Error; err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour + tokenLeeway + time.Second) // past the JWT's exp (DefaultTTL one hour)
		if _, err := s.Verify(context.Background(), issued.Secret); err != ErrUnauthenticated {
			t.Fatalf("Verify of a remembered token past its exp = %v, want ErrUnauthenticated", err)
		}
	})
}
