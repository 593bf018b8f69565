// Package client is the Go client for licensor's API, for consumers that
// create and manage licenses.
//
// Every call follows the project's retry policy (docs/clients.md):
// CreateLicense makes one Idempotency-Key per call, before the first attempt,
// and sends it on every retry, so a retry gets the first outcome back and
// never a second license. Network errors, timeouts, 5xx, 429, 409
// request_in_progress and 202 operation_pending are retried with exponential
// backoff and jitter, honouring a longer Retry-After, until the call
// succeeds, its attempts are spent (DefaultMaxAttempts, WithMaxAttempts) or
// the context's deadline would pass; any other 4xx is returned at once as an
// *APIError.
//
// VerifyWebhook checks a webhook licensor sent (SignatureHeader), and Event
// is its body. The package imports the standard library and, for the
// signature scheme licensor signs with, the module's internal/hmacsig,
// which imports the standard library only.
package client
