package client

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/licensor-api/licensor/internal/wait"
)

// Codes of the API's answers that the retry policy reads.
const (
	CodeRequestInProgress = "request_in_progress" // 409: the same key is executing now
	CodeOperationPending  = "operation_pending"   // 202: the outcome is being reconciled
)

// APIError is an answer from the API that is not the call's success: the
// status and the body's Laravel-shaped message, code and field errors.
type APIError struct {
	Status     int
	Code       string              // machine-readable case, e.g. "domain_taken"; may be empty
	Message    string              // the API's message, or the status text when the body had none
	Fields     map[string][]string // validation errors by field (the body's "errors")
	RetryAfter time.Duration       // the Retry-After header; 0 when absent
	RequestID  string              // the X-Request-Id header: quote it when reporting a problem
	// OperationID names the operation a 202 operation_pending keeps (its
	// body's operation.id): WaitOperation waits for its outcome.
	OperationID string
}

// Error is "licensor API: <status> <code>: <message> (request <id>)".
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("licensor API: ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	b.WriteString(": " + e.Message)
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	return b.String()
}

// Retryable reports whether the retry policy retries this answer: any 5xx,
// a 429, a 409 request_in_progress, a 202 operation_pending. Any other 4xx
// would be answered the same way again.
func (e *APIError) Retryable() bool {
	switch {
	case e.Status >= 500, e.Status == http.StatusTooManyRequests:
		return true
	case e.Status == http.StatusConflict:
		return e.Code == CodeRequestInProgress
	case e.Status == http.StatusAccepted:
		return e.Code == CodeOperationPending
	}
	return false
}

// newAPIError reads an answer that is not the call's success. A body that
// is not the API's JSON (a proxy's HTML page) leaves the status text.
func newAPIError(status int, h http.Header, body []byte, now time.Time) *APIError {
	var b struct {
		Message string              `json:"message"`
		Code    string              `json:"code"`
		Errors  map[string][]string `json:"errors"`
		// Operation is a 202's: {"id","status","retry_after"}.
		Operation struct {
			ID string `json:"id"`
		} `json:"operation"`
	}
	_ = json.Unmarshal(body, &b) // best effort: the status alone is an answer
	e := &APIError{Status: status, Code: b.Code, Message: b.Message, Fields: b.Errors, RequestID: h.Get("X-Request-Id"),
		OperationID: b.Operation.ID}
	if e.Message == "" {
		e.Message = http.StatusText(status) + "."
	}
	e.RetryAfter, _ = wait.RetryAfter(h.Get("Retry-After"), now)
	return e
}
