package idempotency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// FuzzCanonical checks canonicalJSON and fingerprint on arbitrary bodies:
//
//   - canonicalJSON never panics, and is idempotent:
//     canonicalJSON(canonicalJSON(x)) == canonicalJSON(x);
//   - a body that is not JSON (json.Valid) is returned as it is, as
//     canonicalJSON's documentation says;
//   - for a JSON body, canonicalJSON is valid, compact JSON, and the same JSON
//     value written another way (the target re-encodes the parsed value
//     itself: object keys in another order, other white space, strings with
//     \u escapes) has the same canonicalJSON and so the same fingerprint;
//   - one scalar of the value changed (a string, number, boolean or null
//     chosen by the input) gives another canonicalJSON and another fingerprint.
//
// As a test (`go test ./app/idempotency -run FuzzCanonical`) it runs the
// seeds below and those in testdata/fuzz/FuzzCanonical. To search for minutes:
//
//	go test ./app/idempotency -run '^$' -fuzz '^FuzzCanonical$' -fuzztime 3m
func FuzzCanonical(f *testing.F) {
	for _, seed := range []struct {
		body string
		how  uint8
	}{
		{`{"name":"Acme","domain":"acme.test"}`, 0},
		{`{"domain":"acme.test","name":"Acme"}`, 1},
		{" {\n\t\"b\" : [1, 2.50, -0, 1e3, 1E+3],\r\n \"a\" : {\"z\":null,\"y\":true,\"x\":false} } ", 2},
		{`{"a":1,"a":2}`, 3}, // a duplicate key: the last wins, in Canonical as in the target's parse
		{`{"<html>":"&amp;","\u00e9":"\u2028\ud83d\ude80"}`, 4},
		{`{"k":"\ud800"}`, 5}, // a lone surrogate decodes to U+FFFD
		{"{\"k\":\"\xff\xfe\"}", 6},
		{`[{"b":{"d":[],"c":{}},"a":[[[]]]},"",0]`, 7},
		{`12345678901234567890123456789`, 8}, // numbers are kept as written
		{`"just a string"`, 9},
		{`null`, 10},
		{`{}`, 11},
		{``, 0},
		{`not json`, 0},
		{`{"a":1} {"b":2}`, 0}, // two values: not one JSON body
		{`{"a":`, 0},
		{"\xef\xbb\xbf{}", 0}, // a byte order mark is not JSON
	} {
		f.Add([]byte(seed.body), seed.how)
	}
	f.Fuzz(func(t *testing.T, body []byte, how uint8) {
		in := bytes.Clone(body)
		c := canonicalJSON(body)
		if !bytes.Equal(body, in) {
			t.Fatalf("Canonical modified its input: %q became %q", in, body)
		}
		if cc := canonicalJSON(c); !bytes.Equal(cc, c) {
			t.Fatalf("Canonical is not idempotent:\n body      %q\n once      %q\n twice     %q", body, c, cc)
		}
		if !json.Valid(body) {
			if !bytes.Equal(c, body) {
				t.Fatalf("Canonical changed a body that is not JSON:\n body      %q\n canonical %q", body, c)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("Canonical of JSON is not JSON:\n body      %q\n canonical %q", body, c)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, c); err != nil || !bytes.Equal(compact.Bytes(), c) {
			t.Fatalf("Canonical is not compact:\n body      %q\n canonical %q", body, c)
		}
		v := decodeNumbers(t, body)
		fp := fingerprint("POST", "/api/v1/licenses", c)

		// The same value, written another way.
		other := rewriteJSON(v, how)
		if oc := canonicalJSON(other); !bytes.Equal(oc, c) {
			t.Fatalf("the same JSON written another way has another Canonical:\n body      %q\n rewritten %q\n canonical %q\n of rewrite %q", body, other, c, oc)
		}
		if ofp := fingerprint("POST", "/api/v1/licenses", canonicalJSON(other)); ofp != fp {
			t.Fatalf("the same JSON written another way has another Fingerprint: %q and %q", body, other)
		}

		// Another value: one scalar changed.
		n := countScalars(v)
		if n == 0 {
			return // only empty objects and arrays: nothing to change
		}
		changed, _ := mutateScalar(v, int(how)%n)
		mutated := rewriteJSON(changed, how/2)
		mc := canonicalJSON(mutated)
		if bytes.Equal(mc, c) {
			t.Fatalf("a different JSON value has the same Canonical:\n body      %q\n mutated   %q\n canonical %q", body, mutated, c)
		}
		if fingerprint("POST", "/api/v1/licenses", mc) == fp {
			t.Fatalf("a different JSON value has the same Fingerprint: %q and %q", body, mutated)
		}
	})
}

// decodeNumbers parses body as Canonical does: numbers kept as written.
func decodeNumbers(t *testing.T, body []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("json.Valid accepted %q but decoding failed: %v", body, err)
	}
	return v
}

// rewriteJSON writes v as JSON, but not as Canonical would: how chooses the
// order of each object's keys (reversed, or rotated), the white space
// between tokens, and whether strings are escaped as \uXXXX throughout.
func rewriteJSON(v any, how uint8) []byte {
	var b bytes.Buffer
	w := &jsonRewriter{buf: &b, how: how}
	w.value(v)
	return b.Bytes()
}

type jsonRewriter struct {
	buf *bytes.Buffer
	how uint8
	n   int // tokens written, to vary the white space
}

func (w *jsonRewriter) space() {
	w.n++
	if w.how&1 == 0 {
		return
	}
	w.buf.WriteString([]string{" ", "\n", "\t ", "\r\n  ", ""}[(w.n+int(w.how))%5])
}

func (w *jsonRewriter) value(v any) {
	w.space()
	switch v := v.(type) {
	case nil:
		w.buf.WriteString("null")
	case bool:
		w.buf.WriteString(strconv.FormatBool(v))
	case json.Number:
		w.buf.WriteString(v.String())
	case string:
		w.str(v)
	case []any:
		w.buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				w.space()
				w.buf.WriteByte(',')
			}
			w.value(e)
		}
		w.space()
		w.buf.WriteByte(']')
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		if w.how&2 == 0 {
			slices.Reverse(keys)
		} else if len(keys) > 0 {
			r := int(w.how) % len(keys)
			keys = append(keys[r:], keys[:r]...)
		}
		w.buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.space()
				w.buf.WriteByte(',')
			}
			w.space()
			w.str(k)
			w.space()
			w.buf.WriteByte(':')
			w.value(v[k])
		}
		w.space()
		w.buf.WriteByte('}')
	default:
		panic(fmt.Sprintf("rewriteJSON: unexpected %T", v))
	}
}

// str writes s as a JSON string: with encoding/json's escaping (which
// escapes <, > and & unlike Canonical), or every character as \uXXXX.
func (w *jsonRewriter) str(s string) {
	if w.how&4 == 0 {
		b, err := json.Marshal(s)
		if err != nil {
			panic(err)
		}
		w.buf.Write(b)
		return
	}
	w.buf.WriteByte('"')
	for _, r := range s {
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(w.buf, `\u%04X`, u)
		}
	}
	w.buf.WriteByte('"')
}

// countScalars counts the strings, numbers, booleans and nulls in v.
func countScalars(v any) int {
	switch v := v.(type) {
	case []any:
		n := 0
		for _, e := range v {
			n += countScalars(e)
		}
		return n
	case map[string]any:
		n := 0
		for _, e := range v {
			n += countScalars(e)
		}
		return n
	}
	return 1
}

// mutateScalar returns a copy of v whose i-th scalar (in sorted key order)
// is replaced by a different value, and how many scalars it passed.
func mutateScalar(v any, i int) (any, int) {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		seen := 0
		for j, e := range v {
			var n int
			out[j], n = mutateScalar(e, i-seen)
			seen += n
		}
		return out, seen
	case map[string]any:
		out := make(map[string]any, len(v))
		seen := 0
		for _, k := range slices.Sorted(maps.Keys(v)) {
			var n int
			out[k], n = mutateScalar(v[k], i-seen)
			seen += n
		}
		return out, seen
	}
	if i != 0 {
		return v, 1
	}
	switch v := v.(type) {
	case nil:
		return false, 1
	case bool:
		return !v, 1
	case json.Number:
		if s, ok := strings.CutPrefix(string(v), "-"); ok {
			return json.Number(s), 1
		}
		return json.Number("-" + v), 1
	case string:
		return v + "x", 1
	}
	panic(fmt.Sprintf("mutateScalar: unexpected %T", v))
}
