// Package client is the Go client for licensor's API, for consumers that
// create and manage licenses.
//
// Every call follows the project's retry policy (docs/clients.md):
// CreateLicense makes one Idempotency-Key per call, before the first attempt,
// and sends it on every retry, so a retry gets the first outcome back and
// never a second license. Network errors (a refused connection included, as
// while licensor restarts), timeouts, 5xx, 429, 409 request_in_progress and
// 202 operation_pending are retried with exponential backoff and jitter,
// honouring a longer Retry-After, until the call succeeds, its attempts are
// spent (DefaultMaxAttempts, WithMaxAttempts) or the context's deadline
// would pass; any other 4xx is returned at once as an *APIError. A network
// error after the request was written is retried only for calls safe to
// repeat: keyed creates, reads, revokes, endpoint updates and deletes.
//
// Beyond licenses: Events reads the events feed as an iterator,
// WaitOperation waits for the operation a 202 named, and
// CreateWebhookEndpoint and its siblings manage webhook endpoints.
//
// VerifyWebhook checks a webhook licensor sent (SignatureHeader), and Event
// is its body. The package imports the standard library and, for the
// signature scheme licensor signs with, the module's internal/hmacsig,
// which imports the standard library only.
package client
