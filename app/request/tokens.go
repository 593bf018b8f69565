package request

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/internal/fault"
)

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

// BindIssueToken reads raw (the body's object) by IssueTokenRules, every
// rule of every field, as Laravel's validator runs them: a required rule
// that fails stops that field's other rules; a nullable field that is null
// (or absent, or an empty string: ConvertEmptyStringsToNull) has no other
// rule run. The in rule takes auth.Known. Strings are trimmed, as
// Laravel's TrimStrings middleware leaves them. The error is a
// *fault.Fields; the input is returned with it, its Abilities (every
// string item, known or not) read for the grant check that comes before
// validation.
func BindIssueToken(raw map[string]json.RawMessage) (auth.IssueInput, error) {
	var in auth.IssueInput
	verr := &fault.Fields{}
	bindString(raw, verr, "consumer", true, &in.Consumer)

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
			if !ok || !isString || !slices.Contains(auth.Known, s) {
				verr.Add(field, "The selected "+field+" is invalid.")
			}
		}
	}

	bindString(raw, verr, "name", false, &in.Name)
	if utf8.RuneCountInString(in.Name) > 255 {
		verr.Add("name", "The name field must not be greater than 255 characters.")
	}
	var expiresIn string
	bindString(raw, verr, "expires_in", false, &expiresIn)
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

// bindString reads the string field of raw into dst, as Laravel's
// validator sees it after TrimStrings and ConvertEmptyStringsToNull:
// absent, null or blank leaves dst "" (the required error when required);
// another JSON type is the field's type error. A string that is not valid
// UTF-8 is refused too, rather than read with its bad bytes replaced (two
// different bodies would then be one intent). False on an error.
func bindString(raw map[string]json.RawMessage, verr *fault.Fields, field string, required bool, dst *string) bool {
	v, present := raw[field]
	s, isString, ok := laravelString(v, present)
	switch {
	case !ok && required:
		verr.Add(field, "The "+attribute(field)+" field is required.")
	case !ok:
		return true
	case !isString:
		verr.Add(field, "The "+attribute(field)+" field must be a string.")
	case !ValidText(v):
		verr.Add(field, InvalidUTF8(attribute(field)))
	default:
		*dst = s
		return true
	}
	return false
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
