package vendorproto

import (
	"time"

	"github.com/licensor-api/licensor/internal/hmacsig"
)

// SignatureHeader carries the signature of the vendor's webhooks.
//
// The scheme is Stripe's, and its home is internal/hmacsig: the header's
// value is "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + raw
// body)>", with one v1 per secret while the signer rotates its secret.
// licensor signs the webhooks it sends the same way, under a header of its
// own.
const SignatureHeader = "Vendor-Signature"

// Errors of Verify: hmacsig's, so that errors.Is holds either way.
var (
	// ErrBadSignature is a signature missing, given in several headers,
	// malformed, or with no v1 that matches the body under any secret.
	ErrBadSignature = hmacsig.ErrBadSignature
	// ErrStale is a good signature whose timestamp is farther from now than
	// the tolerance: a replay, or a clock far off.
	ErrStale = hmacsig.ErrStale
)

// Sign returns the SignatureHeader value of body sent at t, as hmacsig.Sign
// writes it.
func Sign(secret string, t time.Time, body []byte) string {
	return hmacsig.Sign(secret, t, body)
}

// Verify checks body against the values of its SignatureHeader as
// hmacsig.Verify does: exactly one header, a v1 that is body's HMAC under
// one of secrets (else ErrBadSignature), then a timestamp within tolerance
// of now (else ErrStale).
func Verify(headers []string, body []byte, secrets []string, now time.Time, tolerance time.Duration) error {
	return hmacsig.Verify(headers, body, secrets, now, tolerance)
}
