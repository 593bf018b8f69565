package audit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// An actor is a token with its id, or the console or the reconciler with
// nothing else: anything else names no actor the server knows.
func TestActorCheck(t *testing.T) {
	for _, a := range []Actor{ByToken("c", "t", "r"), ByToken("", "t", ""), Console(), Reconciler()} {
		if err := a.Check(); err != nil {
			t.Errorf("%+v: %v, want a known actor", a, err)
		}
	}
	for _, a := range []Actor{{}, {Kind: ActorToken}, ByToken("c", "", "r"), {Kind: ActorConsole, TokenID: "t"},
		{Kind: ActorConsole, ConsumerID: "c"}, {Kind: ActorConsole, RequestID: "r"}, {Kind: "request", TokenID: "t"},
		{Kind: ActorReconciler, TokenID: "t"}, {Kind: ActorReconciler, ConsumerID: "c"}, {Kind: ActorReconciler, RequestID: "r"}} {
		if err := a.Check(); !errors.Is(err, ErrNoActor) {
			t.Errorf("%+v: %v, want ErrNoActor", a, err)
		}
	}
}

// A reason is trimmed, required, valid UTF-8 and at most 500 characters
// (not bytes); each refusal is Laravel's message on reason.
func TestReason(t *testing.T) {
	for in, want := range map[string]string{"  why \n": "why", strings.Repeat("é", MaxReason): strings.Repeat("é", MaxReason)} {
		if got, err := Reason(in); err != nil || got != want {
			t.Errorf("Reason(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"":                                   "The reason field is required.",
		" \t ":                               "The reason field is required.",
		strings.Repeat("x", MaxReason+1):     "The reason field must not be greater than 500 characters.",
		"bad \xff byte":                      "The reason field must be valid UTF-8.",
		" " + strings.Repeat("é", 501) + " ": "The reason field must not be greater than 500 characters.",
	} {
		_, err := Reason(in)
		var v *ValidationError
		if !errors.As(err, &v) || len(v.FieldErrors()["reason"]) != 1 || v.FieldErrors()["reason"][0] != msg || !strings.Contains(err.Error(), msg) {
			t.Errorf("Reason(%.20q) = %v, want %q on reason", in, err, msg)
		}
	}
}

// Record writes an event with its actor's fields (none for the console)
// and refuses an unknown actor; List selects one subject type (or one
// subject), oldest or newest first, whole or a page.
func TestRecordAndList(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		at := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
		for i, c := range []struct {
			by     Actor
			change Change
		}{
			{Console(), Change{Event: TokenIssued, SubjectType: SubjectToken, SubjectID: "t1"}},
			{ByToken("c1", "t1", "r1"), Change{Event: TokenIssued, SubjectType: SubjectToken, SubjectID: "t2"}},
			{ByToken("c1", "t1", ""), Change{Event: TokenRevoked, SubjectType: SubjectToken, SubjectID: "t2"}},
			{Console(), Change{Event: IntentDiscarded, SubjectType: SubjectIntent, SubjectID: "i1", Reason: "why"}},
			{Reconciler(), Change{Event: IntentAttempted, SubjectType: SubjectIntent, SubjectID: "i1", Reason: "attempt 2: completed"}},
		} {
			if err := Record(db.Gorm, c.by, c.change, at.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if err := Record(db.Gorm, Actor{}, Change{Event: TokenIssued, SubjectType: SubjectToken, SubjectID: "t3"}, at); !errors.Is(err, ErrNoActor) {
			t.Errorf("Record without an actor = %v, want ErrNoActor", err)
		}
		all, total, err := List(ctx, db.Gorm, Filter{SubjectType: SubjectToken})
		if err != nil || total != 3 || len(all) != 3 || all[0].SubjectID != "t1" || all[2].Event != TokenRevoked {
			t.Fatalf("List oldest first = %+v (%d), %v", all, total, err)
		}
		if e := all[0]; e.Actor != ActorConsole || e.ActorTokenID != nil || e.ActorConsumerID != nil || e.RequestID != nil || e.Reason != nil ||
			!e.CreatedAt.Equal(dbtime.Stamp(at)) {
			t.Errorf("the console's event = %+v", e)
		}
		if e := all[1]; e.Actor != ActorToken || *e.ActorTokenID != "t1" || *e.ActorConsumerID != "c1" || *e.RequestID != "r1" {
			t.Errorf("a token's event = %+v", e)
		}
		if all[2].RequestID != nil {
			t.Errorf("no request id is null, not %q", *all[2].RequestID)
		}
		page, total, err := List(ctx, db.Gorm, Filter{SubjectType: SubjectToken, SubjectID: "t2", NewestFirst: true, Page: 1, PerPage: 1})
		if err != nil || total != 2 || len(page) != 1 || page[0].Event != TokenRevoked {
			t.Errorf("t2's newest = %+v (%d), %v", page, total, err)
		}
		intents, _, err := List(ctx, db.Gorm, Filter{SubjectType: SubjectIntent, SubjectID: "i1"})
		if err != nil || len(intents) != 2 || *intents[0].Reason != "why" {
			t.Fatalf("i1's events = %+v, %v", intents, err)
		}
		if e := intents[1]; e.Event != IntentAttempted || e.Actor != ActorReconciler || e.ActorTokenID != nil || e.ActorConsumerID != nil ||
			e.RequestID != nil || *e.Reason != "attempt 2: completed" {
			t.Errorf("the reconciler's event = %+v", e)
		}
		injected := errors.New("injected")
		q := testdb.Inject(t, db.Gorm, "query", Event{}.TableName(), nil, injected)
		for _, f := range []Filter{{SubjectType: SubjectToken, PerPage: 1}, {SubjectType: SubjectToken}} {
			q.Arm(1)
			if _, _, err := List(ctx, db.Gorm, f); !errors.Is(err, injected) {
				t.Errorf("List(%+v) with a failing read = %v", f, err)
			}
		}
		c := testdb.Inject(t, db.Gorm, "create", Event{}.TableName(), nil, injected)
		c.Arm(1)
		if err := Record(db.Gorm, Console(), Change{Event: TokenIssued, SubjectType: SubjectToken, SubjectID: "t9"}, at); !errors.Is(err, injected) ||
			!strings.Contains(err.Error(), TokenIssued) {
			t.Errorf("Record with a failing insert = %v", err)
		}
	})
}
