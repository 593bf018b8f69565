package http

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/operations"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// The vendor's webhooks: POST /api/webhooks/vendor, no bearer token, the raw
// body signed Stripe-style in Vendor-Signature, each event applied once
// through the webhooks.vendor operation under its id.
const (
	// webhookTolerance is how far a signature's timestamp may be from now:
	// a replayed old delivery is refused even with a good signature.
	webhookTolerance = 5 * time.Minute
)

var (
	errBadSignature = &Error{Status: http.StatusUnauthorized, Message: "The webhook signature is invalid.", Code: "invalid_signature"}
	errStaleWebhook = &Error{Status: http.StatusBadRequest, Message: "The webhook signature is too old or from the future.", Code: "signature_expired"}
	errBadEvent     = &Error{Status: http.StatusBadRequest, Message: "The webhook body is not a vendor event.", Code: "malformed_json"}
	// errFutureEvent refuses an event created later than the tolerance from
	// now (or in milliseconds, which reads as a date millennia away): it
	// would outrank every real event of its license, and no stored time may
	// be one a read cannot render.
	errFutureEvent = &Error{Status: http.StatusBadRequest, Code: "invalid_event",
		Message: "The event's created time is ahead of now: it must be a Unix time in seconds, at most 5 minutes ahead."}
	// errEventID refuses an event whose id cannot name an event here: its
	// id is what the event is recorded (and deduplicated) under.
	errEventID = &Error{Status: http.StatusBadRequest, Code: "invalid_event",
		Message: "The event's id must be 1 to 255 visible ASCII characters, without spaces."}
)

// refuseEvent counts and logs (never the body) a vendor webhook refused
// before anything was recorded, and answers err.
func (s *Server) refuseEvent(c echo.Context, reason string, err *Error) error {
	s.metrics.ObserveVendorEventRefused(reason)
	s.log.Info("vendor webhook refused", "request_id", RequestID(c), "reason", reason)
	return err
}

// eventConflict answers an event id delivered before with another body.
func eventConflict(id string) *Error {
	return &Error{Status: http.StatusConflict, Code: "event_conflict",
		Message: "The event " + id + " was received before with another body; an event id names one event."}
}

// vendorWebhook is POST /api/webhooks/vendor.
func (s *Server) vendorWebhook(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err // a body over the limit is errTooLarge
	}
	if err := verifySignature(c.Request().Header.Values(vendorproto.SignatureHeader), body, s.webhookSecrets, s.now()); err != nil {
		return s.refuseEvent(c, err.Code, err)
	}
	ev, err := operations.ParseVendorEvent(body)
	if err != nil {
		return s.refuseEvent(c, "malformed_json", errBadEvent)
	}
	if ev.At.After(s.now().Add(webhookTolerance)) {
		return s.refuseEvent(c, "future_event", errFutureEvent)
	}
	caller := idempotency.Caller{ConsumerID: operations.VendorConsumer, RequestID: RequestID(c)}
	res, replayed, err := s.ops.VendorEvent.Do(c.Request().Context(), s.guard, caller, ev.ID, ev, body)
	if errors.Is(err, idempotency.ErrKeyInvalid) { // refused before anything is recorded
		return s.refuseEvent(c, "invalid_event_id", errEventID)
	}
	if errors.Is(err, idempotency.ErrKeyReused) {
		return eventConflict(ev.ID)
	}
	if errors.Is(err, idempotency.ErrDiscarded) {
		// An operator settled this event for good: received, never applied,
		// so that the vendor stops redelivering it.
		s.log.Info("vendor webhook discarded by an operator", "request_id", RequestID(c), "event_id", ev.ID, "type", ev.Type)
		return c.JSONBlob(http.StatusOK, operations.Received.Body)
	}
	if err != nil {
		return err
	}
	s.log.Info("vendor webhook", "request_id", RequestID(c), "event_id", ev.ID, "type", ev.Type,
		"site_id", ev.Site.ID, "replayed", replayed)
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
