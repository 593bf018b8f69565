package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
)

// canonicalJSON returns the canonical JSON of body: object keys sorted at every
// depth, insignificant white space removed, numbers kept as written. A body
// that is not JSON is returned as it is, so it is hashed as raw bytes.
func canonicalJSON(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body
	}
	// Nothing may follow the value, not even a stray ] or } (which More
	// alone does not see), or {"a":1}] would pass as {"a":1}.
	if _, err := dec.Token(); err != io.EOF {
		return body
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return body
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// fingerprint is the SHA-256, in hex, of the method, the route and the
// canonical intent of a request.
func fingerprint(method, route string, intent []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(route))
	h.Write([]byte{0})
	h.Write(intent)
	return hex.EncodeToString(h.Sum(nil))
}
