package idempotency

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzIdempotencyKey checks the Idempotency-Key rule of the middleware,
// (*Guard).key, on requests built with httptest that carry the header zero,
// one or two times with arbitrary values: a key is accepted, and returned as
// it is, iff the header is given exactly once with 1–255 bytes all in
// 0x21–0x7E (visible ASCII); given twice or malformed it is ErrKeyInvalid;
// absent it is "" (or ErrKeyMissing when keys are required). It never
// panics.
//
// As a test (`go test ./app/idempotency -run FuzzIdempotencyKey`) it runs the
// seeds below and those in testdata/fuzz/FuzzIdempotencyKey. To search for
// minutes:
//
//	go test ./app/idempotency -run '^$' -fuzz '^FuzzIdempotencyKey$' -fuzztime 3m
func FuzzIdempotencyKey(f *testing.F) {
	const one, two = 1, 2
	for _, seed := range []struct {
		first, second string
		count         uint8
		required      bool
	}{
		{"", "", 0, false},
		{"", "", 0, true},
		{"3f6c2b1e-9a4d-4c7e-8b2f-1d5e6a7b8c9d", "", one, true},
		{"a", "", one, false},
		{"!", "", one, false},
		{"~", "", one, false},
		{"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "", one, false},
		{strings.Repeat("k", 255), "", one, false},
		{strings.Repeat("k", 256), "", one, false},
		{"", "", one, false},
		{" ", "", one, false},
		{"key with spaces", "", one, false},
		{"tab\there", "", one, false},
		{"key\x7f", "", one, false},
		{"key\x00", "", one, false},
		{"clé", "", one, false},
		{"key\r\nX-Injected: 1", "", one, false},
		{"a,b", "", one, false}, // a comma is visible ASCII: one value
		{"a", "b", two, false},
		{"a", "a", two, true},
		{"a", "", two, false},
	} {
		f.Add(seed.first, seed.second, seed.count, seed.required)
	}
	f.Fuzz(func(t *testing.T, first, second string, count uint8, required bool) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/licenses", nil)
		vals := []string{first, second}[:count%3]
		if len(vals) > 0 {
			req.Header[HeaderKey] = vals // as given: the rule must hold for any value
		}
		g := &Guard{cfg: Config{Required: required}}
		got, err := g.HeaderKey(req.Header.Values(HeaderKey))

		switch {
		case len(vals) == 0 && required:
			if !errors.Is(err, ErrKeyMissing) || got != "" {
				t.Fatalf("no header, keys required: key() = %q, %v; want ErrKeyMissing", got, err)
			}
		case len(vals) == 0:
			if err != nil || got != "" {
				t.Fatalf("no header: key() = %q, %v; want \"\", nil", got, err)
			}
		case len(vals) == 1 && keyRuleHolds(vals[0]):
			if err != nil || got != vals[0] {
				t.Fatalf("key(%q) = %q, %v; want it accepted as it is", vals[0], got, err)
			}
		default:
			if !errors.Is(err, ErrKeyInvalid) || got != "" {
				t.Fatalf("key(%q) = %q, %v; want ErrKeyInvalid", vals, got, err)
			}
		}
	})
}

// keyRuleHolds is the documented rule, written independently of key: 1 to 255
// characters, each visible ASCII (0x21 '!' to 0x7E '~'), not starting
// "auto:" (the server's prefix).
func keyRuleHolds(k string) bool {
	if len(k) < 1 || len(k) > 255 || len(k) >= 5 && k[:5] == "auto:" {
		return false
	}
	return strings.Trim(k, "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~") == ""
}
