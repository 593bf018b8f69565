package request

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/licensor-api/licensor/internal/fault"
)

// IssueToken is a POST /api/tokens body after its rules: strings trimmed,
// as Laravel's TrimStrings middleware leaves them.
type IssueToken struct {
	Consumer  string
	Abilities []string // every string item, known or not (for the grant check)
	Name      string
	TTL       time.Duration // expires_in; 0: the default lifetime
}

// IssueTokenRules is the order of POST /api/tokens' rules, as its Laravel
// FormRequest would declare them:
//
//	'consumer'    => ['required', 'string'],
//	'abilities'   => ['required', 'array'],
//	'abilities.*' => ['string', 'in:…known abilities…'],
//	'name'        => ['nullable', 'string', 'max:255'],
//	'expires_in'  => ['nullable', 'string', new PositiveDuration],
//
// abilities.* stands for abilities.0, abilities.1, … in their order, and
// their errors come after the other fields' (RuleOrder).
var IssueTokenRules = []string{"consumer", "abilities", "abilities.*", "name", "expires_in"}

// FieldsError is a 422 of fields in rule order: a *fault.Fields. The name
// stays while the operator console's tests (app/web) name it.
type FieldsError = fault.Fields

// BindIssueToken reads raw (the body's object) by IssueTokenRules, every
// rule of every field, as Laravel's validator runs them: a required rule
// that fails stops that field's other rules; a nullable field that is null
// (or absent, or an empty string: ConvertEmptyStringsToNull) has no other
// rule run. known is the abilities the in rule takes. The error is a
// *fault.Fields; the input is returned with it, its Abilities read for the
// grant check that comes before validation.
func BindIssueToken(raw map[string]json.RawMessage, known []string) (IssueToken, error) {
	var in IssueToken
	verr := &fault.Fields{}
	str := func(field string, required bool, dst *string) {
		v, present := raw[field]
		s, isString, ok := laravelString(v, present)
		switch {
		case !ok && required:
			verr.Add(field, "The "+attribute(field)+" field is required.")
		case !ok:
		case !isString:
			verr.Add(field, "The "+attribute(field)+" field must be a string.")
		case !ValidText(v):
			verr.Add(field, InvalidUTF8(attribute(field)))
		default:
			*dst = s
		}
	}
	str("consumer", true, &in.Consumer)

	abilities, present := raw["abilities"]
	var items []json.RawMessage
	switch {
	case !present || string(abilities) == "null":
		verr.Add("abilities", "The abilities field is required.")
	case abilities[0] != '[' || json.Unmarshal(abilities, &items) != nil:
		if string(abilities) == `""` {
			verr.Add("abilities", "The abilities field is required.")
		} else {
			verr.Add("abilities", "The abilities field must be an array.")
		}
	case len(items) == 0:
		verr.Add("abilities", "The abilities field is required.")
	default:
		for i, item := range items {
			field := fmt.Sprintf("abilities.%d", i)
			s, isString, ok := laravelString(item, true)
			if !ok || !isString {
				verr.Add(field, "The "+field+" field must be a string.")
			}
			if isString {
				in.Abilities = append(in.Abilities, s)
			}
			if !ok || !isString || !slices.Contains(known, s) {
				verr.Add(field, "The selected "+field+" is invalid.")
			}
		}
	}

	str("name", false, &in.Name)
	if utf8.RuneCountInString(in.Name) > 255 {
		verr.Add("name", "The name field must not be greater than 255 characters.")
	}
	var expiresIn string
	str("expires_in", false, &expiresIn)
	if expiresIn != "" {
		if d, err := time.ParseDuration(expiresIn); err != nil || d <= 0 {
			verr.Add("expires_in", "The expires in field must be a positive duration such as 720h.")
		} else {
			in.TTL = d
		}
	}
	if len(verr.Fields) > 0 {
		verr.Order = RuleOrder(verr.Fields, IssueTokenRules)
		return in, verr
	}
	return in, nil
}

// laravelString is a JSON value as Laravel's validator sees it after
// TrimStrings and ConvertEmptyStringsToNull: ok false for absent, null or
// a string empty once trimmed; isString false for another JSON type.
func laravelString(v json.RawMessage, present bool) (s string, isString, ok bool) {
	if !present || len(v) == 0 || string(v) == "null" {
		return "", false, false
	}
	if v[0] != '"' {
		return "", false, true
	}
	if json.Unmarshal(v, &s) != nil {
		return "", false, true
	}
	s = strings.TrimSpace(s)
	return s, true, s != ""
}

// attribute is Laravel's displayable name of a field: underscores become
// spaces ("expires_in" is "expires in").
func attribute(field string) string { return strings.ReplaceAll(field, "_", " ") }
