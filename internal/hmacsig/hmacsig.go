// Package hmacsig is the webhook signature scheme, Stripe's: a header value
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + raw body)>", with
// one v1 per secret while the signer rotates it. The vendor signs the
// webhooks licensor receives this way, and licensor those it sends. It
// imports only the standard library, so that package client, which
// consumers import, stays light.
package hmacsig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Errors of Verify.
var (
	// ErrBadSignature is a signature missing, given in several headers,
	// malformed, or with no v1 that matches the body under any secret.
	ErrBadSignature = errors.New("bad webhook signature")
	// ErrStale is a good signature whose timestamp is farther from now than
	// the tolerance: a replay, or a clock far off.
	ErrStale = errors.New("webhook signature timestamp outside the tolerance")
)

// Sign returns the signature header value of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks body against the values of its signature header (as
// http.Header.Values gives them): exactly one, with a v1 that is body's
// HMAC under one of secrets, else ErrBadSignature. An empty secret is
// skipped: anyone can MAC under it. Only then is the timestamp checked, so
// a caller without a good signature learns nothing of the clock: more than
// tolerance off is ErrStale. Parts other than t and v1 are ignored, and so
// is a v1 that is not a hex SHA-256.
func Verify(headers []string, body []byte, secrets []string, now time.Time, tolerance time.Duration) error {
	if len(headers) != 1 {
		return ErrBadSignature
	}
	var t string
	var sigs [][]byte
	for part := range strings.SplitSeq(headers[0], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return ErrBadSignature
		case k == "t":
			t = v
		case k == "v1":
			if sig, err := hex.DecodeString(v); err == nil && len(sig) == sha256.Size {
				sigs = append(sigs, sig)
			}
		}
	}
	ts, err := strconv.ParseInt(t, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	matched := false
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		want := mac(secret, t, body) // t as sent: the signer MACed those bytes
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				matched = true
			}
		}
	}
	if !matched {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}
