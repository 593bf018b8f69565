package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/licensor-api/licensor/internal/hmacsig"
)

// The headers of a webhook licensor sends. The event id is the body's
// "id" too; trust the body's, which the signature covers.
const (
	SignatureHeader = "Licensor-Signature" // "t=<unix seconds>,v1=<hex HMAC-SHA256>"
	EventIDHeader   = "Licensor-Event-Id"
)

// DefaultWebhookTolerance is VerifyWebhook's default tolerance.
const DefaultWebhookTolerance = 5 * time.Minute

// Errors of VerifyWebhook.
var (
	// ErrBadSignature is a signature missing, malformed, or that does not
	// match the body under the secret: the request is not licensor's, or
	// its body was changed. Answer it with a 4xx and do nothing.
	ErrBadSignature = hmacsig.ErrBadSignature
	// ErrStaleSignature is a good signature whose timestamp is farther from
	// now than the tolerance: a replay of an old delivery, or a clock far
	// off (check NTP).
	ErrStaleSignature = hmacsig.ErrStale
)

// VerifyWebhook checks that body, the raw bytes before any decoding, is a
// webhook licensor sent under secret, the endpoint's signing secret; header is
// the SignatureHeader value. A signature that is not the HMAC-SHA256 of
// "<t>.<body>" is ErrBadSignature (so is an empty secret); a t farther than
// tolerance from now (≤ 0: DefaultWebhookTolerance) is ErrStaleSignature.
// Tell the two apart with errors.Is.
func VerifyWebhook(secret, header string, body []byte, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultWebhookTolerance
	}
	if secret == "" {
		return fmt.Errorf("verify webhook: the signing secret is empty: %w", ErrBadSignature)
	}
	if err := hmacsig.Verify([]string{header}, body, []string{secret}, time.Now(), tolerance); err != nil {
		return fmt.Errorf("verify webhook: %w", err)
	}
	return nil
}

// The types of licensor's events. A receiver ignores a type it does not
// know: new ones may come.
const (
	EventLicenseCreated          = "license.created"
	EventLicenseRevoked          = "license.revoked"
	EventLicenseSuspended        = "license.suspended"
	EventLicenseReactivated      = "license.reactivated"
	EventLicenseKeyRotated       = "license.key_rotated"
	EventWebhookEndpointDisabled = "webhook_endpoint.disabled"
)

// Event is the body of a webhook licensor sends:
// {"id","type","created_at","data":{…},"sequence"}. Delivery is at least
// once: the same event (the same ID) may come more than once, and events
// may come out of order; Sequence grows with each event of a license, so an
// event whose Sequence is not above the last one handled for its license
// is stale.
type Event struct {
	ID        string          `json:"id"`   // the same on every redelivery: deduplicate by it
	Type      string          `json:"type"` // EventLicenseCreated, …
	CreatedAt time.Time       `json:"created_at"`
	Sequence  uint64          `json:"sequence"`
	Data      json.RawMessage `json:"data"` // {"license":{…}} for the license events; see License
}

// ErrNoLicense is Event.License's error for an event that carries no
// license, such as EventWebhookEndpointDisabled.
var ErrNoLicense = errors.New("the event carries no license")

// License decodes the license the event carries, as it was after the change.
func (e Event) License() (License, error) {
	var d struct {
		License *License `json:"license"`
	}
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return License{}, fmt.Errorf("event %s: decode the license: %w", e.ID, err)
		}
	}
	if d.License == nil {
		return License{}, fmt.Errorf("event %s (%s): %w", e.ID, e.Type, ErrNoLicense)
	}
	return *d.License, nil
}
