package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// encodeHeaders writes the headers a replay repeats as "Name: value" lines,
// sorted, which a replay sets without a JSON decode.
func encodeHeaders(h map[string]string) string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(h[name])
		b.WriteByte('\n')
	}
	return b.String()
}

// eachHeader calls fn for each header stored by encodeHeaders, or in the JSON
// object older records hold.
func eachHeader(stored string, fn func(name, value string)) error {
	if strings.HasPrefix(stored, "{") {
		var h map[string]string
		if err := json.Unmarshal([]byte(stored), &h); err != nil {
			return err
		}
		for name, value := range h {
			fn(name, value)
		}
		return nil
	}
	for line := range strings.SplitSeq(stored, "\n") {
		if name, value, ok := strings.Cut(line, ": "); ok {
			fn(name, value)
		}
	}
	return nil
}

// storedHeader returns one stored header's value, "" when absent.
func storedHeader(stored *string, name string) string {
	if stored == nil {
		return ""
	}
	var found string
	_ = eachHeader(*stored, func(n, v string) {
		if http.CanonicalHeaderKey(n) == http.CanonicalHeaderKey(name) {
			found = v
		}
	})
	return found
}

// bodyHash is the hex SHA-256 of a request's method, route and body bytes,
// each length-prefixed so that no two requests share an encoding.
func bodyHash(method, route string, body []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(method), []byte(route), body} {
		var n [8]byte
		for i, l := 0, len(part); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
