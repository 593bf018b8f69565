package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/internal/fault"
)

// Error is an answer: everything an error's response needs, and its body
// in Laravel's shape. Handlers and middleware return it; handleError
// answers any other error by its code (the answers table) or its kind.
type Error struct {
	Status     int            `json:"-"`
	Message    string         `json:"message"`
	Code       string         `json:"code,omitempty"`   // machine-readable case, when there is one
	Errors     *orderedErrors `json:"errors,omitempty"` // a 422's field errors, in their order
	RetryAfter int            `json:"-"`                // seconds; a Retry-After header when > 0
	// Operation names the intent a 202 leaves pending; its Location header
	// is where to ask about it.
	Operation *pendingOperation `json:"operation,omitempty"`
}

// pendingOperation is the intent a 202 operation_pending names.
type pendingOperation struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	RetryAfter int    `json:"retry_after"`
}

func (e *Error) Error() string { return e.Message }

// unavailableRetryAfter is the Retry-After, in seconds, of a 503 for a
// database that is unavailable.
const unavailableRetryAfter = 5

var (
	errUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", RetryAfter: unavailableRetryAfter,
		Message: "The service is temporarily unavailable. Retry later."}
	errInternal = &Error{Status: http.StatusInternalServerError, Message: "Server Error"}
	// errClientClosed is nginx's 499: the client closed the request before
	// the answer; counted as such, never as a 5xx.
	errClientClosed = &Error{Status: 499, Message: "Client Closed Request."}
	errTooLarge     = &Error{Status: http.StatusRequestEntityTooLarge, Message: "The request body is too large.", Code: "payload_too_large"}
	errNotFound     = &Error{Status: http.StatusNotFound, Message: "Not Found."}
)

// handleError is the one error boundary: it turns any error into a JSON body
// with the right status: Laravel's shape, or RFC 9457 problem details when
// the request asks for application/problem+json. Internal errors are
// logged, never shown.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	e := s.toError(err, c)
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if e.Operation != nil {
		c.Response().Header().Set(echo.HeaderLocation, operationLocation(e.Operation.ID))
	}
	if s.pages != nil && e.Status >= 400 && s.pages.Owns(c.Request().URL.Path) {
		// A page's error is a page: the status and message mapped here, the
		// HTML written by the pages.
		if err := s.pages.RenderError(c, e.Status, e.Message); err != nil {
			s.log.Warn("write error page", "request_id", RequestID(c), "error", err)
		}
		return
	}
	var body any = e
	if e.Status >= 400 {
		// The shape of an error depends on Accept (a 202 is no error: always Laravel's).
		c.Response().Header().Add("Vary", "Accept")
		if wantsProblem(c.Request().Header.Values(echo.HeaderAccept)) {
			c.Response().Header().Set(echo.HeaderContentType, problemMediaType)
			body = newProblem(e)
		}
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(e.Status)
	} else {
		werr = c.JSON(e.Status, body)
	}
	if werr != nil {
		s.log.Warn("write error response", "request_id", RequestID(c), "error", werr)
	}
}

// toError is err's answer: an answer as it is; a page's refusal, Echo's
// own error, field errors by their kind; app/idempotency's refusals; an
// application error by its code (answers), or as it is when it carries
// its status (fault.Answer); and the failures that are no
// one's answer (a key this replica lacks, a client gone, a database down)
// by what they say, logged. Anything else is a 500, logged.
func (s *Server) toError(err error, c echo.Context) *Error {
	var e *Error
	var pe publicError
	var he *echo.HTTPError
	var fields *fault.Fields
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &pe):
		return &Error{Status: pe.StatusCode(), Message: pe.PublicMessage()}
	case errors.As(err, &he) && echoAnswer(he) != nil:
		return echoAnswer(he)
	case errors.As(err, &fields):
		return validationError(fields)
	}
	if e := idempotencyAnswer(err); e != nil {
		return e
	}
	code := fault.Code(err)
	if answer, ok := answers[code]; ok {
		return answer(err)
	}
	var own *fault.Error
	if errors.As(err, &own) && own.Status != 0 {
		return &Error{Status: own.Status, Code: own.Code, Message: own.Message, RetryAfter: retryAfterOr(own.RetryAfter, 0)}
	}
	switch {
	case errors.Is(err, crypt.ErrDecrypt):
		s.keyWarning.note(s.log, s.now(), c)
		return errKeyUnavailable
	case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
		// The client hung up during a read: nothing to answer, no bug to page for.
		s.log.Info("client went away", "request_id", RequestID(c), "route", c.Path())
		return errClientClosed
	case code == "database_unavailable":
		s.log.Warn("database unavailable", "request_id", RequestID(c), "route", c.Path(), "error", err)
		return errUnavailable
	}
	s.log.Error("internal error", "request_id", RequestID(c), "route", c.Path(), "error", err)
	return errInternal
}

// answers is the application errors' answers, by code (fault.Code: the
// code of the first *fault.Error in an error's chain).
var answers = map[string]func(error) *Error{
	"unauthenticated":         always(errUnauthenticated),
	"token_not_found":         always(errNotFound),
	"license_not_found":       always(errNotFound),
	"webhook_not_found":       always(errNotFound),
	"event_not_found":         always(errNotFound),
	"ability_not_grantable":   notGrantable,
	"domain_taken":            always(coded(http.StatusConflict, "domain_taken", "The domain is already licensed.")),
	"malformed_json":          always(errMalformedJSON),
	"unsupported_media_type":  always(errNotJSON),
	webhooks.CodeRetryTooSoon: retryLimited,
	"unknown_delivery_status": always(validationError(&fault.Fields{Fields: map[string][]string{"status": {"The selected status is invalid."}}})),
	"too_many_endpoints": always(coded(http.StatusConflict, "too_many_endpoints", fmt.Sprintf(
		"You have %d webhook endpoints, the most a consumer may have. Delete one (or change one's url or events) instead.", webhooks.MaxEndpoints))),
	"delivery_in_progress": always(coded(http.StatusConflict, "delivery_in_progress",
		"The delivery is being sent right now; its attempt decides. Retry it once that attempt is recorded.")),
	"vendor_unavailable": vendorUnavailable,
	"vendor_rejected":    always(coded(http.StatusUnprocessableEntity, "vendor_rejected", "The license vendor rejected the request.")),
	// The vendor's outcome is unknown: kept pending, nothing of its answer shown.
	"vendor_uncertain": func(error) *Error { return pending("") },
}

// coded is the answer of that status, code and message.
func coded(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// always is the answer that does not depend on the error.
func always(e *Error) func(error) *Error { return func(error) *Error { return e } }

// retryLimited is the 429 of a consumer's retry of a delivery within
// webhooks.ConsumerRetryEvery of the last, after its RetryAfter.
func retryLimited(err error) *Error {
	var soon *fault.Error
	errors.As(err, &soon)
	return &Error{Status: http.StatusTooManyRequests, Code: "retry_limited", RetryAfter: retryAfterOr(soon.RetryAfter, 1),
		Message: fmt.Sprintf("A delivery of this endpoint was retried less than %s ago. Retry after Retry-After seconds; "+
			"every pending delivery is retried on its own schedule meanwhile.", webhooks.ConsumerRetryEvery)}
}

// notGrantable is the 403 for a token asking to grant more than it may, or
// to revoke a token holding more than it may grant: it names the abilities
// refused (auth's words: NotGrantableError.Explain).
func notGrantable(err error) *Error {
	ng := &auth.NotGrantableError{}
	errors.As(err, &ng)
	return &Error{Status: http.StatusForbidden, Code: "ability_not_grantable", Message: ng.Explain()}
}

// keyUnavailableRetryAfter is the Retry-After, in seconds, of a 503
// key_unavailable: long enough for a rolling restart to move on, or for
// another replica to answer.
const keyUnavailableRetryAfter = 5

// errKeyUnavailable answers a request that met a value sealed under a key
// this replica does not hold (crypt.ErrDecrypt): a replica configured
// without a key another one writes under, mid-rotation. Nothing was done
// that a retry would repeat; the body says nothing of keys or values.
var errKeyUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "key_unavailable", RetryAfter: keyUnavailableRetryAfter,
	Message: "This server cannot read the stored data right now. Retry later."}

// keyWarningEvery is how often, at most, a replica logs that it met data
// sealed under a key it does not hold: every request so refused is a 503
// in the access log; the cause is told once per interval, with how many
// requests it refused since it was last told.
const keyWarningEvery = time.Minute

// keyWarning logs the cause of 503 key_unavailable once per keyWarningEvery.
// The zero value is ready to use.
type keyWarning struct {
	mu      sync.Mutex
	last    time.Time // when the cause was last logged; zero: never
	refused int       // requests refused since then, not counted in a line yet
}

// note counts one refused request and logs the cause when it was not
// logged within keyWarningEvery. The line names no key, no value and no
// envelope: only where to look.
func (w *keyWarning) note(log *slog.Logger, now time.Time, c echo.Context) {
	w.mu.Lock()
	w.refused++
	due := w.last.IsZero() || now.Sub(w.last) >= keyWarningEvery
	refused := w.refused
	if due {
		w.last, w.refused = now, 0
	}
	w.mu.Unlock()
	if !due {
		return
	}
	log.Error("data sealed under a key this replica does not hold: check APP_KEY and APP_PREVIOUS_KEYS on every replica",
		"request_id", RequestID(c), "route", c.Path(), "refused", refused)
}

// echoAnswers are the router's and Echo's own errors that have a code of
// licensor's; any other 4xx (404, 405, 400, …) is its reason phrase, in
// Laravel's words, without Echo's internal text.
var echoAnswers = map[int]*Error{
	http.StatusRequestEntityTooLarge: errTooLarge,
	http.StatusUnsupportedMediaType:  errNotJSON,
}

// echoAnswer is he's answer; nil for a 5xx from Echo itself (logged as
// internal by toError).
func echoAnswer(he *echo.HTTPError) *Error {
	if e, ok := echoAnswers[he.Code]; ok {
		return e
	}
	if he.Code >= 400 && he.Code < 500 {
		return &Error{Status: he.Code, Message: http.StatusText(he.Code) + "."}
	}
	return nil
}

// publicError is an error that carries its status and a message written to
// be shown (the operator console's refusals: a missing session, a missing
// ability, a form without its CSRF token).
type publicError interface {
	StatusCode() int
	PublicMessage() string
}

// pendingRetryAfter is the Retry-After, in seconds, of a 202 operation_pending.
const pendingRetryAfter = 5

// pending is the answer to a request whose outcome is not known yet: it
// names the intent (id "" only if an uncertain error ever escaped the
// idempotency layer, which keeps every such intent).
func pending(id string) *Error {
	e := &Error{
		Status:     http.StatusAccepted,
		Message:    "The outcome is not known yet; the request is kept and will be finished. Ask for it at the operation's Location, or retry the same request (with the same Idempotency-Key, if you sent one).",
		Code:       "operation_pending",
		RetryAfter: pendingRetryAfter,
	}
	if id != "" {
		e.Operation = &pendingOperation{ID: id, Status: idempotency.StatusPending, RetryAfter: pendingRetryAfter}
	}
	return e
}

// errRequestInProgress answers a key whose request is still being processed.
var errRequestInProgress = &Error{Status: http.StatusConflict, Code: "request_in_progress", RetryAfter: 1,
	Message: "A request with this Idempotency-Key is still being processed. Retry shortly."}

// idempotencyAnswers are the idempotency layer's answers, the first whose
// error errors.Is matches.
var idempotencyAnswers = []struct {
	err    error
	answer *Error
}{
	{idempotency.ErrIntentNotFound, errNotFound},
	{idempotency.ErrKeyInvalid, coded(http.StatusBadRequest, "idempotency_key_invalid", "The Idempotency-Key header must be given once, as 1 to 255 visible ASCII characters.")},
	{idempotency.ErrKeyMissing, coded(http.StatusBadRequest, "idempotency_key_missing", "This request needs an Idempotency-Key header.")},
	{idempotency.ErrKeyReused, coded(http.StatusUnprocessableEntity, "idempotency_key_reused", "This Idempotency-Key was used with another request. Use a new key for a new request.")},
	{idempotency.ErrInProgress, errRequestInProgress},
	{idempotency.ErrSuperseded, coded(http.StatusConflict, "intent_superseded", "This request was superseded: its domain's license was revoked while it was open, so it will not be executed. List your licenses for the current state.")},
	{idempotency.ErrLeaseLost, errRequestInProgress},
	{idempotency.ErrNotFailed, coded(http.StatusConflict, "intent_not_failed", "Only a failed intent can be retried; this one is not failed.")},
	{idempotency.ErrRetryOnly, coded(http.StatusConflict, "intent_not_discardable", "A revoke is retried, never discarded: repeating it is safe and its license waits on it. Retry it instead.")},
	{idempotency.ErrSubjectBusy, coded(http.StatusConflict, "intent_not_discardable", "Another intent for the same domain is still open: the vendor's site may be its own. Discard this one once that one is settled.")},
	{idempotency.ErrNotDiscardable, coded(http.StatusConflict, "intent_not_discardable", "Only a failed or abandoned intent can be discarded; this one is neither.")},
	// The operator's reason is for the audit trail, never for the consumer.
	{idempotency.ErrDiscarded, coded(http.StatusConflict, "intent_discarded", "An operator discarded this request; send a new Idempotency-Key to try again.")},
	{idempotency.ErrNotKept, &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", RetryAfter: pendingRetryAfter,
		Message: "The outcome of this request could not be recorded. Retry it: it will not create a second license."}},
	{idempotency.ErrNotRecorded, &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", RetryAfter: pendingRetryAfter,
		Message: "The request could not be recorded, so nothing was done. Retry it."}},
	{idempotency.ErrBodyUnreadable, errMalformedJSON},
}

// idempotencyAnswer is the idempotency layer's answer to err; nil when err
// is none of its errors. A pending outcome names its intent.
func idempotencyAnswer(err error) *Error {
	var p *idempotency.PendingError
	if errors.As(err, &p) {
		return pending(p.ID)
	}
	if errors.Is(err, idempotency.ErrPending) {
		return pending("")
	}
	for _, a := range idempotencyAnswers {
		if errors.Is(err, a.err) {
			return a.answer
		}
	}
	return nil
}

// vendorRetryAfter is the Retry-After, in seconds, of a 503
// vendor_unavailable when the vendor named no wait: a floor, not a
// forecast (the driver has already spent its own retries); a client's
// backoff grows from it.
const vendorRetryAfter = 1

// vendorRetryAfterMax caps the vendor's own Retry-After passed on with a
// 503 vendor_unavailable: five minutes, past which a client had better ask
// again than trust a vendor's forecast (a maintenance window's date, say).
const vendorRetryAfterMax = 300

// retryAfterOr is d in whole seconds (rounded up), or def when d is none.
func retryAfterOr(d time.Duration, def int) int {
	if s := int(math.Ceil(d.Seconds())); s > 0 {
		return s
	}
	return def
}

// vendorUnavailable is the 503 of a vendor that did nothing, with its own
// Retry-After when it gave one. Nothing of its answer reaches the client.
func vendorUnavailable(err error) *Error {
	var u *licenses.UnavailableError
	var after time.Duration
	if errors.As(err, &u) {
		after = u.RetryAfter
	}
	return &Error{Status: http.StatusServiceUnavailable, Message: "The license vendor is unavailable. Try again later.",
		Code: "vendor_unavailable", RetryAfter: min(retryAfterOr(after, vendorRetryAfter), vendorRetryAfterMax)}
}

// tooManyAttempts is Laravel's throttle answer: the consumer is over its
// rate limit until the window ends, retryAfter seconds from now.
func tooManyAttempts(retryAfter int) *Error {
	return &Error{Status: http.StatusTooManyRequests, Message: "Too Many Attempts.", Code: "rate_limited", RetryAfter: retryAfter}
}

// validationError is Laravel's 422 of f: its first message, "(and N more
// errors)", and every message under its field, in f's order.
func validationError(f *fault.Fields) *Error {
	e := &Error{Status: http.StatusUnprocessableEntity, Message: f.Message()}
	if len(f.Fields) > 0 {
		e.Errors = &orderedErrors{f}
	}
	return e
}

// orderedErrors renders "errors" with its keys in rule order, which a Go
// map cannot keep.
type orderedErrors struct{ *fault.Fields }

var _ json.Marshaler = (*orderedErrors)(nil)

// MarshalJSON writes the object key by key, in order.
func (o *orderedErrors) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.Keys() {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := resource.Marshal(k)
		if err != nil {
			return nil, err
		}
		msgs, err := resource.Marshal(o.Fields.Fields[k])
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(msgs)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
