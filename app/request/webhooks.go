package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/internal/fault"
)

// CreateEndpointRules is the order of POST /api/webhook-endpoints' rules,
// as its Laravel FormRequest would declare them (the URL policy, the known
// event types and the limits are app/webhooks'):
//
//	'url'         => ['required', 'string', new WebhookURL],
//	'events'      => ['nullable', 'array', 'min:1'],
//	'events.*'    => ['string', new EventType],
//	'description' => ['nullable', 'string', 'max:500'],
var CreateEndpointRules = []string{"url", "events", "events.*", "description"}

// PatchEndpointRules is the order of PATCH /api/webhook-endpoints/{id}'s
// rules; each applies only when its field is sent ('sometimes'):
//
//	'url'      => ['sometimes', 'required', 'string', new WebhookURL],
//	'events'   => ['sometimes', 'required', 'array', 'min:1'],
//	'events.*' => ['string', new EventType],
//	'enabled'  => ['sometimes', 'boolean'],
var PatchEndpointRules = []string{"url", "events", "events.*", "enabled"}

// BindCreateEndpoint reads raw (the body's object) for a new endpoint:
// each field's JSON type, as Laravel's validator sees it after TrimStrings
// and ConvertEmptyStringsToNull (events absent, null or "" is every
// license event). The input holds every field of the right type; a field
// of the wrong type is in the *fault.Fields (nil when none), and left empty
// in the input, for app/webhooks to check the rest beside it.
func BindCreateEndpoint(raw map[string]json.RawMessage) (webhooks.EndpointInput, *fault.Fields) {
	var in webhooks.EndpointInput
	verr := &fault.Fields{}
	bindString(raw, verr, "url", &in.URL)
	if v, present := raw["events"]; present {
		in.Events = bindTypes(v, verr)
	}
	bindString(raw, verr, "description", &in.Description)
	return in, orNil(verr)
}

// BindPatchEndpoint reads raw for a change to an endpoint, as
// BindCreateEndpoint does: only the fields sent are in the patch. A url
// or events sent as null (or "") is the empty value app/webhooks refuses
// (the url is required, events must list one type).
func BindPatchEndpoint(raw map[string]json.RawMessage) (webhooks.EndpointPatch, *fault.Fields) {
	var p webhooks.EndpointPatch
	verr := &fault.Fields{}
	if _, present := raw["url"]; present {
		var url string
		if bindString(raw, verr, "url", &url) {
			p.URL = &url
		}
	}
	if v, present := raw["events"]; present {
		types := bindTypes(v, verr)
		if types == nil {
			types = []string{}
		}
		if _, bad := verr.Fields["events"]; !bad {
			p.Events = &types
		}
	}
	if v, present := raw["enabled"]; present {
		if b, ok := laravelBoolean(v); ok {
			p.Enabled = &b
		} else {
			verr.Add("enabled", "The enabled field must be true or false.")
		}
	}
	return p, orNil(verr)
}

// bindString reads the string field into dst (trimmed; absent or null
// leaves it ""), or adds its type error; false on an error.
func bindString(raw map[string]json.RawMessage, verr *fault.Fields, field string, dst *string) bool {
	v, present := raw[field]
	s, isString, ok := laravelString(v, present)
	switch {
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

// bindTypes reads an events array: nil for null or "" (not given), its
// string items trimmed otherwise. A value that is no array is an error on
// events; an item that is no string one on its index (events.0), and it is
// left out of what is returned.
func bindTypes(v json.RawMessage, verr *fault.Fields) []string {
	if string(v) == "null" || string(v) == `""` {
		return nil
	}
	var items []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &items) != nil {
		verr.Add("events", "The events field must be an array.")
		return nil
	}
	types := make([]string, 0, len(items))
	for i, item := range items {
		s, isString, ok := laravelString(item, true)
		if !ok || !isString || !ValidText(item) {
			verr.Add(fmt.Sprintf("events.%d", i), fmt.Sprintf("The events.%d field must be a string.", i))
			continue
		}
		types = append(types, s)
	}
	return types
}

// laravelBoolean is Laravel's boolean rule: true, false, 1, 0, "1" or "0"
// (a form's enabled=1). "true" and "false" as strings are not booleans to
// it, nor to licensor.
func laravelBoolean(v json.RawMessage) (bool, bool) {
	switch strings.TrimSpace(string(v)) {
	case "true", "1", `"1"`:
		return true, true
	case "false", "0", `"0"`:
		return false, true
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch strings.TrimSpace(s) { // TrimStrings: " 1 " is "1"
		case "1":
			return true, true
		case "0":
			return false, true
		}
	}
	return false, false
}

// orNil is f, or nil when it holds no error.
func orNil(f *fault.Fields) *fault.Fields {
	if len(f.Fields) == 0 {
		return nil
	}
	return f
}

// MergeFields is the one 422 of a body whose type errors (types, nil for
// none) and whose domain checks (domain, a *fault.Fields or nil) each
// failed for some fields: a field's type error stands in for the domain's
// message about it, which only saw it empty (an array's items that are no
// strings are left out of what the domain checks: their errors go beside
// its message on the rest). order is the rules' order, in which
// RuleOrder puts the fields. Nil when neither
// failed; domain as it is when it is no validation error.
func MergeFields(types *fault.Fields, domain error, order []string) error {
	out := &fault.Fields{Fields: map[string][]string{}}
	if types != nil {
		for f, msgs := range types.Fields {
			out.Fields[f] = msgs
		}
	}
	var fe *fault.Fields
	if errors.As(domain, &fe) {
		for f, msgs := range fe.Fields {
			if _, typed := out.Fields[f]; !typed {
				out.Fields[f] = msgs
			}
		}
	} else if domain != nil {
		return domain
	}
	if len(out.Fields) == 0 {
		return nil
	}
	out.Order = RuleOrder(out.Fields, order)
	return out
}
