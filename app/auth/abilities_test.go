package auth

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestCanGrant(t *testing.T) {
	grants := map[string][]string{ // granter's abilities → what it may grant
		"*":                            Known,
		"tokens:manage":                {LicensesRead, LicensesWrite, WebhooksManage},
		"tokens:manage,intents:manage": {LicensesRead, LicensesWrite, WebhooksManage},
		"tokens:manage,*":              Known,
		"intents:manage":               nil,
		"licenses:read,licenses:write": nil,
		"":                             nil,
	}
	granters := map[string]Abilities{
		"*": {All}, "tokens:manage": {TokensManage}, "tokens:manage,intents:manage": {TokensManage, IntentsManage},
		"tokens:manage,*": {TokensManage, All}, "intents:manage": {IntentsManage},
		"licenses:read,licenses:write": {LicensesRead, LicensesWrite}, "": nil,
	}
	for name, granter := range granters {
		for _, ability := range append(slices.Clone(Known), "licenses:delete", "", "Tokens:Manage") {
			want := slices.Contains(grants[name], ability)
			if got := granter.CanGrant(ability); got != want {
				t.Errorf("Abilities{%s}.CanGrant(%q) = %v, want %v", name, ability, got, want)
			}
		}
	}
}

func TestGrantable(t *testing.T) {
	if err := Grantable(Abilities{TokensManage}, []string{LicensesRead, LicensesWrite, "licenses:delete"}); err != nil {
		t.Errorf("consumer abilities (and an unknown one, left to Issue) = %v, want nil", err)
	}
	err := Grantable(Abilities{TokensManage}, []string{LicensesRead, All, TokensManage, All, "bogus"})
	var ng *NotGrantableError
	if !errors.Is(err, ErrNotGrantable) || !errors.As(err, &ng) || !slices.Equal(ng.Abilities, []string{All, TokensManage}) {
		t.Fatalf("Grantable = %#v, want a NotGrantableError naming * and tokens:manage once each", err)
	}
	if err := Grantable(Abilities{All}, Known); err != nil {
		t.Errorf("* granting everything = %v", err)
	}
	if err := Grantable(Abilities{IntentsManage}, []string{LicensesRead}); !errors.Is(err, ErrNotGrantable) {
		t.Errorf("intents:manage granting licenses:read = %v, want ErrNotGrantable", err)
	}
}

// parseAbilities reads what encoding/json reads, for the plain form it
// parses by hand and for every other form it hands to encoding/json.
func TestParseAbilitiesAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`[]`, `["*"]`, `["licenses:read","licenses:write"]`, `[ "a" , "b" ]`, `["a\"b"]`, `["a,b"]`,
		`["a","b,"]`, `["\u0041"]`, `[""]`,
	} {
		got, err := parseAbilities([]byte(in))
		var want Abilities
		if jerr := json.Unmarshal([]byte(in), &want); jerr != nil {
			t.Fatalf("%s: encoding/json: %v", in, jerr)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseAbilities(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `[`, `["a"`, `{"a":1}`, `[1]`} {
		if _, err := parseAbilities([]byte(bad)); err == nil {
			t.Errorf("parseAbilities(%s) accepted it", bad)
		}
	}
}

func TestRevocable(t *testing.T) {
	cases := []struct {
		revoker Abilities
		target  Abilities
		self    bool
		refused []string // nil when the revoke is allowed
	}{
		{Abilities{TokensManage}, Abilities{LicensesRead, LicensesWrite, WebhooksManage}, false, nil},
		{Abilities{TokensManage}, Abilities{All}, false, []string{All}},
		{Abilities{TokensManage}, Abilities{LicensesRead, TokensManage, IntentsManage}, false, []string{TokensManage, IntentsManage}},
		{Abilities{TokensManage, IntentsManage}, Abilities{IntentsManage}, false, []string{IntentsManage}},
		{Abilities{TokensManage}, Abilities{TokensManage}, true, nil}, // itself
		{Abilities{All}, Abilities{All, "retired:ability"}, false, nil},
		{Abilities{IntentsManage}, Abilities{LicensesRead}, false, []string{LicensesRead}},
		{nil, Abilities{LicensesRead}, false, []string{LicensesRead}}, // no token at all
	}
	for _, tc := range cases {
		target := Token{ID: "target", Abilities: tc.target}
		revokerID := "revoker"
		if tc.self {
			revokerID = target.ID
		}
		err := Revocable(revokerID, tc.revoker, target)
		ng := &NotGrantableError{}
		switch {
		case tc.refused == nil && err != nil:
			t.Errorf("%v revoking %v: %v, want allowed", tc.revoker, tc.target, err)
		case tc.refused != nil && (!errors.As(err, &ng) || !ng.Revoke || !slices.Equal(ng.Abilities, tc.refused)):
			t.Errorf("%v revoking %v: %v, want refused for %v", tc.revoker, tc.target, err, tc.refused)
		}
	}
}
