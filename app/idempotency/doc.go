// Package idempotency makes write routes safe to retry: an Idempotency-Key
// names one intent, the work happens once, and every retry gets the first
// response back. It is generic and knows nothing about licenses.
package idempotency
