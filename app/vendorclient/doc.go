// Package vendorclient holds the drivers that satisfy licenses.Vendor: the
// http driver that speaks the vendor protocol (shared/spec/vendor.md), an
// in-memory fake, and the simulator, an http.Handler that serves the same
// protocol from memory with faults on demand.
//
// The vendor offers no idempotency key, so the http driver retries only a
// 429 and classifies every other failure: unavailable (nothing happened),
// rejected (refused, nothing happened) or uncertain (a write was sent and
// its outcome is unknown).
package vendorclient
