package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/app/webhooks"
)

// Error is an error with everything its response needs. Handlers and
// middleware return it (or a domain error that handleError maps to one).
type Error struct {
	Status     int
	Message    string
	Code       string              // machine-readable case, when there is one
	Fields     map[string][]string // validation errors, rendered as "errors"
	Order      []string            // the fields of Fields in the order they are rendered (rule order)
	RetryAfter int                 // seconds; a Retry-After header when > 0
	// Operation names the intent a 202 leaves pending; its Location header
	// is where to ask about it.
	Operation *pendingOperation
}

// pendingOperation is the intent a 202 operation_pending names.
type pendingOperation struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	RetryAfter int    `json:"retry_after"`
}

func (e *Error) Error() string { return e.Message }

// errorBody is Laravel's error shape.
type errorBody struct {
	Message   string            `json:"message"`
	Code      string            `json:"code,omitempty"`
	Errors    *orderedErrors    `json:"errors,omitempty"`
	Operation *pendingOperation `json:"operation,omitempty"`
}

// unavailable is how an error says "the database cannot serve now; retry
// later": the database package's errors implement it.
type unavailable interface {
	Unavailable() bool
}

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
	var errs *orderedErrors
	if len(e.Fields) > 0 {
		errs = &orderedErrors{fields: e.Fields, order: fieldOrder(e.Fields, e.Order)}
	}
	var body any = errorBody{Message: e.Message, Code: e.Code, Operation: e.Operation, Errors: errs}
	if e.Status >= 400 {
		// The shape of an error depends on Accept (a 202 is no error: always Laravel's).
		c.Response().Header().Add("Vary", "Accept")
		if wantsProblem(c.Request().Header.Values(echo.HeaderAccept)) {
			c.Response().Header().Set(echo.HeaderContentType, problemMediaType)
			body = newProblem(e, errs)
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

func (s *Server) toError(err error, c echo.Context) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var pe publicError
	if errors.As(err, &pe) {
		return &Error{Status: pe.StatusCode(), Message: pe.PublicMessage()}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if e := fromEchoError(he); e != nil {
			return e
		}
	}
	if e := fromDomainError(err); e != nil {
		return e
	}
	if errors.Is(err, crypt.ErrDecrypt) {
		s.keyWarning.note(s.log, s.now(), c)
		return errKeyUnavailable
	}
	if errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil {
		// The client hung up during a read: nothing to answer, no bug to page for.
		s.log.Info("client went away", "request_id", RequestID(c), "route", c.Path())
		return errClientClosed
	}
	var u unavailable
	if errors.As(err, &u) && u.Unavailable() {
		s.log.Warn("database unavailable", "request_id", RequestID(c), "route", c.Path(), "error", err)
		return errUnavailable
	}
	s.log.Error("internal error", "request_id", RequestID(c), "route", c.Path(), "error", err)
	return errInternal
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

// keyWarningMessage is the line keyWarning logs.
const keyWarningMessage = "data sealed under a key this replica does not hold: check APP_KEY and APP_PREVIOUS_KEYS on every replica"

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
	log.Error(keyWarningMessage, "request_id", RequestID(c), "route", c.Path(), "refused", refused)
}

// fromEchoError maps the router's and Echo's own errors (404, 405, 413, …)
// onto Laravel's messages, without leaking Echo's internal text.
func fromEchoError(he *echo.HTTPError) *Error {
	switch he.Code {
	case http.StatusNotFound:
		return errNotFound
	case http.StatusMethodNotAllowed:
		return &Error{Status: http.StatusMethodNotAllowed, Message: "Method Not Allowed."}
	case http.StatusRequestEntityTooLarge:
		return errTooLarge
	case http.StatusUnsupportedMediaType:
		return errNotJSON
	case http.StatusBadRequest:
		return &Error{Status: he.Code, Message: "Bad Request."}
	}
	if he.Code >= 400 && he.Code < 500 {
		return &Error{Status: he.Code, Message: http.StatusText(he.Code) + "."}
	}
	return nil // a 5xx from Echo itself: logged as internal by toError
}

// publicError is an error that carries its status and a message written to
// be shown (the operator console's refusals: a missing session, a missing
// ability, a form without its CSRF token).
type publicError interface {
	StatusCode() int
	PublicMessage() string
}

// fieldErrors is what every domain's validation error offers.
type fieldErrors interface {
	FieldErrors() map[string][]string
}

// fieldOrderer is a validation error that knows its fields' rule order.
type fieldOrderer interface {
	FieldOrder() []string
}

// fromDomainError maps the domain packages' errors; nil when err is none of them.
func fromDomainError(err error) *Error {
	var fe fieldErrors
	switch {
	case errors.As(err, &fe):
		var order []string
		if o, ok := fe.(fieldOrderer); ok {
			order = o.FieldOrder()
		}
		return validationError(fe.FieldErrors(), order...)
	case errors.Is(err, auth.ErrUnauthenticated):
		return errUnauthenticated
	case errors.Is(err, auth.ErrTokenNotFound), errors.Is(err, licenses.ErrNotFound), errors.Is(err, idempotency.ErrIntentNotFound),
		errors.Is(err, webhooks.ErrNotFound), errors.Is(err, events.ErrNotFound):
		return errNotFound
	case errors.Is(err, auth.ErrNotGrantable):
		return notGrantable(err)
	case errors.Is(err, licenses.ErrDomainTaken):
		return &Error{Status: http.StatusConflict, Message: "The domain is already licensed.", Code: "domain_taken"}
	}
	if e := fromIdempotencyError(err); e != nil {
		return e
	}
	if e := fromWebhooksError(err); e != nil {
		return e
	}
	if e := fromRequestError(err); e != nil {
		return e
	}
	return fromVendorError(err)
}

// fromWebhooksError maps the webhook endpoints' and deliveries' refusals
// (their validation errors are fieldErrors, mapped above).
func fromWebhooksError(err error) *Error {
	var soon *webhooks.RetryTooSoonError
	switch {
	case errors.As(err, &soon):
		return &Error{Status: http.StatusTooManyRequests, Code: "retry_limited", RetryAfter: int(math.Ceil(soon.RetryAfter.Seconds())),
			Message: fmt.Sprintf("A delivery of this endpoint was retried less than %s ago. Retry after Retry-After seconds; "+
				"every pending delivery is retried on its own schedule meanwhile.", webhooks.ConsumerRetryEvery)}
	case errors.Is(err, webhooks.ErrUnknownStatus):
		return validationError(map[string][]string{"status": {"The selected status is invalid."}})
	case errors.Is(err, webhooks.ErrTooManyEndpoints):
		return &Error{Status: http.StatusConflict, Code: "too_many_endpoints", Message: fmt.Sprintf(
			"You have %d webhook endpoints, the most a consumer may have. Delete one (or change one's url or events) instead.", webhooks.MaxEndpoints)}
	case errors.Is(err, webhooks.ErrInFlight):
		return &Error{Status: http.StatusConflict, Code: "delivery_in_progress",
			Message: "The delivery is being sent right now; its attempt decides. Retry it once that attempt is recorded."}
	}
	return nil
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

// fromIdempotencyError maps the idempotency layer's answers.
func fromIdempotencyError(err error) *Error {
	switch {
	case errors.Is(err, idempotency.ErrKeyInvalid):
		return &Error{Status: http.StatusBadRequest, Code: "idempotency_key_invalid",
			Message: "The Idempotency-Key header must be given once, as 1 to 255 visible ASCII characters."}
	case errors.Is(err, idempotency.ErrKeyMissing):
		return &Error{Status: http.StatusBadRequest, Code: "idempotency_key_missing",
			Message: "This request needs an Idempotency-Key header."}
	case errors.Is(err, idempotency.ErrKeyReused):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
			Message: "This Idempotency-Key was used with another request. Use a new key for a new request."}
	case errors.Is(err, idempotency.ErrInProgress):
		return &Error{Status: http.StatusConflict, Code: "request_in_progress", RetryAfter: 1,
			Message: "A request with this Idempotency-Key is still being processed. Retry shortly."}
	case errors.Is(err, idempotency.ErrSuperseded):
		return &Error{Status: http.StatusConflict, Code: "intent_superseded",
			Message: "This request was superseded: its domain's license was revoked while it was open, so it will not be executed. List your licenses for the current state."}
	case errors.Is(err, idempotency.ErrLeaseLost):
		return &Error{Status: http.StatusConflict, Code: "request_in_progress", RetryAfter: 1,
			Message: "A request with this Idempotency-Key is still being processed. Retry shortly."}
	case errors.Is(err, idempotency.ErrPending):
		var p *idempotency.PendingError
		errors.As(err, &p)
		id := ""
		if p != nil {
			id = p.ID
		}
		return pending(id)
	case errors.Is(err, idempotency.ErrNotFailed):
		return &Error{Status: http.StatusConflict, Code: "intent_not_failed",
			Message: "Only a failed intent can be retried; this one is not failed."}
	case errors.Is(err, idempotency.ErrRetryOnly):
		return &Error{Status: http.StatusConflict, Code: "intent_not_discardable",
			Message: "A revoke is retried, never discarded: repeating it is safe and its license waits on it. Retry it instead."}
	case errors.Is(err, idempotency.ErrSubjectBusy):
		return &Error{Status: http.StatusConflict, Code: "intent_not_discardable",
			Message: "Another intent for the same domain is still open: the vendor's site may be its own. Discard this one once that one is settled."}
	case errors.Is(err, idempotency.ErrNotDiscardable):
		return &Error{Status: http.StatusConflict, Code: "intent_not_discardable",
			Message: "Only a failed or abandoned intent can be discarded; this one is neither."}
	case errors.Is(err, idempotency.ErrDiscarded):
		// The operator's reason is for the audit trail, never for the consumer.
		return &Error{Status: http.StatusConflict, Code: "intent_discarded",
			Message: "An operator discarded this request; send a new Idempotency-Key to try again."}
	case errors.Is(err, idempotency.ErrNotKept):
		return &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", RetryAfter: pendingRetryAfter,
			Message: "The outcome of this request could not be recorded. Retry it: it will not create a second license."}
	case errors.Is(err, idempotency.ErrNotRecorded):
		return &Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", RetryAfter: pendingRetryAfter,
			Message: "The request could not be recorded, so nothing was done. Retry it."}
	case errors.Is(err, idempotency.ErrBodyUnreadable):
		return errMalformedJSON
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

// fromVendorError maps the vendor's three failure classes. Nothing of the
// vendor's own answer reaches the client.
func fromVendorError(err error) *Error {
	var unavailable *licenses.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		return &Error{
			Status:     http.StatusServiceUnavailable,
			Message:    "The license vendor is unavailable. Try again later.",
			Code:       "vendor_unavailable",
			RetryAfter: min(retryAfterOr(unavailable.RetryAfter, vendorRetryAfter), vendorRetryAfterMax),
		}
	case errors.Is(err, licenses.ErrVendorRejected):
		return &Error{Status: http.StatusUnprocessableEntity, Message: "The license vendor rejected the request.", Code: "vendor_rejected"}
	case errors.Is(err, licenses.ErrVendorUncertain):
		return pending("")
	}
	return nil
}

// tooManyAttempts is Laravel's throttle answer: the consumer is over its
// rate limit until the window ends, retryAfter seconds from now.
func tooManyAttempts(retryAfter int) *Error {
	return &Error{Status: http.StatusTooManyRequests, Message: "Too Many Attempts.", Code: "rate_limited", RetryAfter: retryAfter}
}

var errNotFound = &Error{Status: http.StatusNotFound, Message: "Not Found."}

// validationError is Laravel's 422: the first message, "(and N more
// errors)", and every message under its field. order is the rule order of
// the fields; fields it does not name follow in alphabetical order.
func validationError(fields map[string][]string, order ...string) *Error {
	keys := fieldOrder(fields, order)
	msg, more := "The given data was invalid.", -1
	for _, k := range keys {
		for _, m := range fields[k] {
			if more < 0 {
				msg = m
			}
			more++
		}
	}
	switch {
	case more == 1:
		msg += " (and 1 more error)"
	case more > 1:
		msg += fmt.Sprintf(" (and %d more errors)", more)
	}
	return &Error{Status: http.StatusUnprocessableEntity, Message: msg, Fields: fields, Order: keys}
}

// fieldOrder is the fields with errors: those order names first, in its
// order, then the rest alphabetically.
func fieldOrder(fields map[string][]string, order []string) []string {
	keys := make([]string, 0, len(fields))
	for _, k := range order {
		if _, ok := fields[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// orderedErrors renders "errors" with its keys in rule order, which a Go
// map cannot keep.
type orderedErrors struct {
	fields map[string][]string
	order  []string
}

var _ json.Marshaler = (*orderedErrors)(nil)

// MarshalJSON writes the object key by key, in order.
func (o *orderedErrors) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.order {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := resource.Marshal(k)
		if err != nil {
			return nil, err
		}
		msgs, err := resource.Marshal(o.fields[k])
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
