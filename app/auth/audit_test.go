package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A token issued by a token keeps it as its issuer, one issued at the
// console none; each issue and each revoke that revoked something is an
// event, listed newest first with the names an admin reads it by; a change
// whose actor the server does not know is refused, and changes nothing.
func TestIssuesAndRevokesAreAudited(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		s := newTestService(db, clk, nil)
		ctx := context.Background()
		ops, err := s.Issue(ctx, audit.Console(), IssueInput{Consumer: "ops", Abilities: []string{TokensManage}})
		if err != nil {
			t.Fatal(err)
		}
		if ops.IssuedBy != nil {
			t.Errorf("a console token's issuer = %v, want none", *ops.IssuedBy)
		}
		by := audit.ByToken(ops.ConsumerID, ops.ID, "req-1")
		acme, err := s.Issue(ctx, by, IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}})
		if err != nil || acme.IssuedBy == nil || *acme.IssuedBy != ops.ID {
			t.Fatalf("Issue by a token = %+v, %v; want it as the issuer", acme.IssuedBy, err)
		}
		clk.Advance(time.Minute)
		for range 2 { // the second revokes nothing and records nothing
			if err := s.Revoke(ctx, by, acme.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Revoke(ctx, by, "01NOSUCHTOKEN"); !errors.Is(err, ErrTokenNotFound) {
			t.Errorf("Revoke(unknown) = %v, want ErrTokenNotFound", err)
		}
		for _, nobody := range []audit.Actor{{}, {Kind: audit.ActorToken}} {
			if _, err := s.Issue(ctx, nobody, IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}}); !errors.Is(err, audit.ErrNoActor) {
				t.Errorf("Issue by %+v = %v, want ErrNoActor", nobody, err)
			}
			if err := s.Revoke(ctx, nobody, ops.ID); !errors.Is(err, audit.ErrNoActor) {
				t.Errorf("Revoke by %+v = %v, want ErrNoActor", nobody, err)
			}
		}
		if toks, _ := s.List(ctx, ""); len(toks) != 2 || toks[0].ID != acme.ID || toks[0].RevokedAt == nil || toks[1].RevokedAt != nil {
			t.Fatalf("tokens = %+v, want acme's revoked and ops' live", toks)
		}

		events, total, err := s.Events(ctx, TokenEventFilter{})
		if err != nil || total != 3 || len(events) != 3 {
			t.Fatalf("Events = %+v (%d), %v; want 3", events, total, err)
		}
		type want struct{ event, token, consumer, actor, actorConsumer string }
		for i, w := range []want{
			{audit.TokenRevoked, acme.ID, "acme", audit.ActorToken, "ops"},
			{audit.TokenIssued, acme.ID, "acme", audit.ActorToken, "ops"},
			{audit.TokenIssued, ops.ID, "ops", audit.ActorConsole, ""},
		} {
			e := events[i]
			got := want{e.Event.Event, e.SubjectID, e.Consumer, e.Actor, e.ActorConsumer}
			if got != w {
				t.Errorf("event %d = %+v, want %+v", i, got, w)
			}
		}
		if e := events[0]; ptr.Deref(e.ActorTokenID) != ops.ID || ptr.Deref(e.RequestID) != "req-1" || !e.CreatedAt.Equal(clk.Now()) {
			t.Errorf("the revoke = %+v, want by %s in req-1 at %s", e.Event, ops.ID, clk.Now())
		}
		if one, total, err := s.Events(ctx, TokenEventFilter{TokenID: ops.ID, PerPage: 1}); err != nil || total != 1 || len(one) != 1 {
			t.Errorf("ops' events = %+v (%d), %v", one, total, err)
		}
		if none, total, err := s.Events(ctx, TokenEventFilter{TokenID: "01NOSUCHTOKEN"}); err != nil || total != 0 || none == nil || len(none) != 0 {
			t.Errorf("an unknown token's events = %#v (%d), %v; want an empty list", none, total, err)
		}
		if page, total, err := s.Events(ctx, TokenEventFilter{Page: 2, PerPage: 2}); err != nil || total != 3 || len(page) != 1 || page[0].SubjectID != ops.ID {
			t.Errorf("page 2 of 2 = %+v (%d), %v", page, total, err)
		}
	})
}

// An issue and its event commit together, as do a revoke and its event;
// failing reads and writes of the trail say what failed.
func TestTokenAuditFailures(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := newTestService(db, testkit.NewClock(time.Now()), nil)
		ctx := context.Background()
		ops := issue(t, s, "ops")
		injected := errors.New("injected")
		insert := testdb.Inject(t, db.Gorm, "create", audit.Event{}.TableName(), nil, injected)
		tokens := testdb.Inject(t, db.Gorm, "query", Token{}.TableName(), nil, injected)
		consumers := testdb.Inject(t, db.Gorm, "query", "consumers", nil, injected)
		trail := testdb.Inject(t, db.Gorm, "query", audit.Event{}.TableName(), nil, injected)

		insert.Arm(1)
		if _, err := s.Issue(ctx, audit.Console(), IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}}); !errors.Is(err, injected) {
			t.Errorf("Issue whose event failed = %v", err)
		}
		insert.Arm(1)
		if err := s.Revoke(ctx, audit.Console(), ops.ID); !errors.Is(err, injected) {
			t.Errorf("Revoke whose event failed = %v", err)
		}
		if toks, _ := s.List(ctx, ""); len(toks) != 1 || toks[0].RevokedAt != nil {
			t.Errorf("tokens = %+v, want ops' alone, live", toks)
		}
		tokens.Arm(1)
		if err := s.Revoke(ctx, audit.Console(), ops.ID); !errors.Is(err, injected) {
			t.Errorf("Revoke whose read failed = %v", err)
		}
		for name, f := range map[string]*testdb.Fault{"the trail": trail, "the tokens": tokens, "the consumers": consumers} {
			f.Arm(1)
			if _, _, err := s.Events(ctx, TokenEventFilter{}); !errors.Is(err, injected) {
				t.Errorf("Events whose read of %s failed = %v", name, err)
			}
			f.Disarm()
		}
		if events, _, err := s.Events(ctx, TokenEventFilter{}); err != nil || len(events) != 1 {
			t.Errorf("Events = %+v, %v; want ops' issue alone", events, err)
		}
	})
}
