package http

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/operations"
)

// The vendor's webhooks: POST /api/webhooks/vendor, no bearer token, the raw
// body signed Stripe-style in Vendor-Signature, each event applied once
// through the webhooks.vendor operation under its id.
const (
	headerVendorSignature = "Vendor-Signature"
	// webhookTolerance is how far a signature's timestamp may be from now:
	// a replayed old delivery is refused even with a good signature.
	webhookTolerance = 5 * time.Minute
)

var (
	errBadSignature = &Error{Status: http.StatusUnauthorized, Message: "The webhook signature is invalid.", Code: "invalid_signature"}
	errStaleWebhook = &Error{Status: http.StatusBadRequest, Message: "The webhook signature is too old or from the future.", Code: "signature_expired"}
	errBadEvent     = &Error{Status: http.StatusBadRequest, Message: "The webhook body is not a vendor event.", Code: "malformed_json"}
)

// vendorWebhook is POST /api/webhooks/vendor.
func (s *Server) vendorWebhook(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err // a body over the limit is errTooLarge
	}
	if err := verifySignature(c.Request().Header.Values(headerVendorSignature), body, s.webhookSecrets, s.now()); err != nil {
		s.log.Info("vendor webhook refused", "request_id", RequestID(c), "reason", err.Message)
		return err
	}
	ev, err := operations.ParseVendorEvent(body)
	if err != nil {
		return errBadEvent
	}
	call := idempotency.Call{ConsumerID: operations.VendorConsumer, RequestID: RequestID(c)}
	res, replayed, err := s.ops.VendorEvent.Do(c.Request().Context(), s.guard, call, ev.ID, ev, body)
	if err != nil {
		return err
	}
	s.log.Info("vendor webhook", "request_id", RequestID(c), "event_id", ev.ID, "type", ev.Type,
		"site_id", ev.Site.ID, "replayed", replayed)
	return c.JSONBlob(http.StatusOK, res.Body)
}

// verifySignature checks a Vendor-Signature header, "t=<unix>,v1=<hex>"
// (several v1 during the vendor's secret rotation): some v1 must be the
// HMAC-SHA256, under one of secrets, of t + "." + the raw body, compared in
// constant time, and t within webhookTolerance of now.
func verifySignature(headers []string, body []byte, secrets []string, now time.Time) *Error {
	if len(headers) != 1 || len(secrets) == 0 {
		return errBadSignature
	}
	var t string
	var sigs [][]byte
	for part := range strings.SplitSeq(headers[0], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return errBadSignature
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
		return errBadSignature
	}
	matched := false
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(t))
		mac.Write([]byte("."))
		mac.Write(body)
		want := mac.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				matched = true
			}
		}
	}
	if !matched {
		return errBadSignature
	}
	// Checked after the signature, so an unsigned caller learns nothing of the clock.
	if d := now.Sub(time.Unix(ts, 0)); d > webhookTolerance || d < -webhookTolerance {
		return errStaleWebhook
	}
	return nil
}
