// Package request reads request bodies the way the API promises: JSON
// only, one object, each field's type checked on its own, and Laravel's
// validation rules in their order (Laravel's app/Http/Requests). It knows no
// echo: it is handed the Content-Type and the bytes, and returns the domain's
// input or an error that app/http's error boundary answers.
package request

import (
	"bytes"
	"encoding/json"
	"mime"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/licensor-api/licensor/internal/fault"
)

// Errors a body is refused with before any rule is checked.
var (
	// ErrMalformedJSON: the body is not one JSON object (400 malformed_json).
	ErrMalformedJSON error = fault.New("malformed_json", "the request body is not valid JSON")
	// ErrNotJSON: the Content-Type says the body is not JSON (415).
	ErrNotJSON error = fault.New("unsupported_media_type", "the request body is not JSON")
)

// CheckJSON refuses a body whose Content-Type says it is not JSON; no
// Content-Type at all is taken as JSON.
func CheckJSON(contentType string) error {
	if contentType == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" && !hasJSONSuffix(mt) {
		return ErrNotJSON
	}
	return nil
}

// hasJSONSuffix reports a structured syntax suffix of +json
// (application/merge-patch+json), with a type before it.
func hasJSONSuffix(mt string) bool { return len(mt) > 5 && strings.HasSuffix(mt, "+json") }

// Object reads a body that must be one JSON object into its fields,
// undecoded, so each field's type can be checked on its own.
func Object(b []byte) (map[string]json.RawMessage, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, ErrMalformedJSON
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, ErrMalformedJSON
	}
	return raw, nil
}

// String reads the string field name of raw into dst: absent or null leaves
// dst "" (the rules decide whether that is allowed); any other JSON type is
// Laravel's "must be a string." message, returned ("" when none). A string
// that is not valid UTF-8 is refused too, rather than read with its bad
// bytes replaced (two different bodies would then be one intent).
func String(raw map[string]json.RawMessage, name string, dst *string) string {
	v, ok := raw[name]
	if !ok || string(v) == "null" {
		return ""
	}
	if v[0] != '"' || json.Unmarshal(v, dst) != nil {
		return "The " + name + " field must be a string."
	}
	if !ValidText(v) {
		return InvalidUTF8(name)
	}
	return ""
}

// ValidText reports whether the JSON text b holds only valid UTF-8: no bad
// byte, and no \u escape of a lone surrogate (U+D800 to U+DFFF outside a
// high-low pair), which encoding/json would read as U+FFFD as it does a
// bad byte.
func ValidText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' {
			i++ // an escape of one character: \" \\ \n …
			continue
		}
		r, ok := hex4(b, i+2)
		switch {
		case !ok:
			return false
		case r >= 0xDC00 && r <= 0xDFFF: // a low surrogate with no high one before it
			return false
		case r >= 0xD800 && r <= 0xDBFF: // a high surrogate: a low one must follow
			lo, ok := hex4(b, i+8)
			if !ok || b[i+6] != '\\' || b[i+7] != 'u' || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 11
		default:
			i += 5
		}
	}
	return true
}

// hex4 reads the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// InvalidUTF8 is the message for a field whose string is not valid UTF-8.
func InvalidUTF8(field string) string { return "The " + field + " field must be valid UTF-8." }

// InvalidUTF8Field names the first field of a JSON object body (in sorted
// order) whose value holds bytes that are not valid UTF-8; "" when none.
func InvalidUTF8Field(b []byte) string {
	if ValidText(b) {
		return ""
	}
	raw, err := Object(b)
	if err != nil {
		return ""
	}
	names := make([]string, 0, len(raw))
	for k, v := range raw {
		if !ValidText(v) || !utf8.ValidString(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return strings.ToValidUTF8(names[0], "\uFFFD")
}
