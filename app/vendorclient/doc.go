// Package vendorclient holds the driver that satisfies licenses.Vendor: the
// http driver that speaks the vendor protocol (package vendorproto, where
// its requests, answers and events are described), to VENDOR_URL or to a
// vendor served in this process (NewInProcess: the simulator, package
// vendorsim, is the in-memory fake). licensor's own API, built on it, is
// docs/api.md.
//
// The vendor offers no idempotency key, so the http driver retries only a
// 429 and classifies every other failure: unavailable (nothing happened),
// rejected (refused, nothing happened) or uncertain (a write was sent and
// its outcome is unknown).
package vendorclient
