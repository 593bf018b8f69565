package http

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// The vendor's webhooks: POST /api/webhooks/vendor, no bearer token, the raw
// body signed Stripe-style in Vendor-Signature, each event applied once
// through idempotency.Do under its id.
const (
	// webhookTolerance is how far a signature's timestamp may be from now:
	// a replayed old delivery is refused even with a good signature.
	webhookTolerance = 5 * time.Minute
	// webhookScope is the consumer the vendor's events are recorded under,
	// beside (never among) the consumers' own intents.
	webhookScope     = "vendor"
	webhookOperation = "webhooks.vendor"
)

var (
	errBadSignature = &Error{Status: http.StatusUnauthorized, Message: "The webhook signature is invalid.", Code: "invalid_signature"}
	errStaleWebhook = &Error{Status: http.StatusBadRequest, Message: "The webhook signature is too old or from the future.", Code: "signature_expired"}
	errBadEvent     = &Error{Status: http.StatusBadRequest, Message: "The webhook body is not a vendor event.", Code: "malformed_json"}
)

// webhookReceived is the answer to every event taken (applied now, applied
// before, or of a type licensor does not act on).
var webhookReceived = []byte(`{"received":true}`)

// vendorWebhook is POST /api/webhooks/vendor.
func (s *Server) vendorWebhook(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err // a body over the limit is errTooLarge
	}
	if err := verifySignature(c.Request().Header.Values(vendorproto.SignatureHeader), body, s.webhookSecrets, s.now()); err != nil {
		s.log.Info("vendor webhook refused", "request_id", RequestID(c), "reason", err.Message)
		return err
	}
	var ev vendorproto.Event
	if json.Unmarshal(body, &ev) != nil || ev.ID == "" || ev.Type == "" || ev.Created <= 0 || ev.Data.Site == nil || ev.Data.Site.ID == "" {
		return errBadEvent
	}
	ctx := c.Request().Context()
	sc := idempotency.Scope{ConsumerID: webhookScope, Operation: webhookOperation, Key: ev.ID}
	changed := false
	res, replayed, err := s.idem.Do(ctx, sc, body, func(ctx context.Context) (idempotency.DoResult, error) {
		site := ev.Data.Site
		var err error
		changed, err = s.licenses.ApplyVendorEvent(ctx, licenses.VendorEvent{
			ID: ev.ID, Type: ev.Type, At: time.Unix(ev.Created, 0),
			Site: licenses.Site{ID: site.ID, Name: site.Name, Domain: site.Domain, LicenseKey: site.LicenseKey, Status: site.Status},
		})
		if errors.Is(err, licenses.ErrUnknownEventType) {
			err = nil // taken, not acted on: the vendor may add types
		}
		if err != nil {
			return idempotency.DoResult{}, err
		}
		return idempotency.DoResult{Status: http.StatusOK, Body: webhookReceived,
			Outcome: idempotency.Outcome{ResourceType: "site", ExternalRef: site.ID}}, nil
	})
	if err != nil {
		return err
	}
	s.log.Info("vendor webhook", "request_id", RequestID(c), "event_id", ev.ID, "type", ev.Type,
		"site_id", ev.Data.Site.ID, "replayed", replayed, "changed", changed)
	return c.JSONBlob(http.StatusOK, res.Body)
}

// verifySignature checks a Vendor-Signature header, "t=<unix>,v1=<hex>"
// (several v1 during the vendor's secret rotation), as vendorproto.Verify
// does, with t within webhookTolerance of now.
func verifySignature(headers []string, body []byte, secrets []string, now time.Time) *Error {
	switch err := vendorproto.Verify(headers, body, secrets, now, webhookTolerance); {
	case err == nil:
		return nil
	case errors.Is(err, vendorproto.ErrStale):
		return errStaleWebhook
	default: // vendorproto.ErrBadSignature
		return errBadSignature
	}
}
