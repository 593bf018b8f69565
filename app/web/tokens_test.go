package web

import (
	"reflect"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/internal/fault"
)

func TestNewTokenRowState(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	revokedAt := now.Add(-time.Hour)
	for _, tc := range []struct {
		name string
		tok  auth.Token
		want string
	}{
		{"live", auth.Token{ExpiresAt: now.Add(time.Second)}, "active"},
		{"expiring now", auth.Token{ExpiresAt: now}, "expired"},
		{"expired", auth.Token{ExpiresAt: now.Add(-time.Hour)}, "expired"},
		{"revoked, not expired", auth.Token{ExpiresAt: now.Add(time.Hour), RevokedAt: &revokedAt}, "revoked"},
		{"revoked and expired", auth.Token{ExpiresAt: now.Add(-time.Minute), RevokedAt: &revokedAt}, "revoked"},
	} {
		if got := newTokenRow(tc.tok, now).Status; got != tc.want {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.want)
		}
		if tc.tok.Live(now) != (tc.want == "active") {
			t.Errorf("%s: the row says %q, auth says live=%v", tc.name, tc.want, tc.tok.Live(now))
		}
	}
}

// An item's errors (abilities.N) go beside the abilities, in rule order.
func TestIssueFieldErrorsGroupTheAbilities(t *testing.T) {
	fe := &fault.Fields{
		Fields: map[string][]string{"abilities.1": {"second"}, "abilities.0": {"first"}, "consumer": {"c"}},
		Order:  []string{"consumer", "abilities.0", "abilities.1"},
	}
	want := map[string][]string{"consumer": {"c"}, "abilities": {"first", "second"}}
	if got := issueFieldErrors(fe); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Every known ability has a label and an element id of its own.
func TestEveryAbilityHasALabelAndAnID(t *testing.T) {
	ids := map[string]bool{}
	for _, a := range auth.Known {
		if abilityLabels[a] == "" {
			t.Errorf("%s has no label", a)
		}
		id := abilityID(a)
		if ids[id] {
			t.Errorf("%s: id %q taken", a, id)
		}
		ids[id] = true
	}
}
