package vendorproto

import (
	"time"

	"github.com/licensor-api/licensor/internal/hmacsig"
)

// SignatureHeader carries the signature of the vendor's webhooks, in
// internal/hmacsig's scheme (Stripe's).
const SignatureHeader = "Vendor-Signature"

// Errors of Verify: hmacsig's, so that errors.Is holds either way.
var (
	ErrBadSignature = hmacsig.ErrBadSignature
	ErrStale        = hmacsig.ErrStale
)

// Sign returns the SignatureHeader value of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	return hmacsig.Sign(secret, t, body)
}

// Verify checks body against the values of its SignatureHeader, as
// hmacsig.Verify does.
func Verify(headers []string, body []byte, secrets []string, now time.Time, tolerance time.Duration) error {
	return hmacsig.Verify(headers, body, secrets, now, tolerance)
}
