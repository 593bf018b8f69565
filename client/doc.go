// Package client is the Go client for licensor's API: one Idempotency-Key per
// intent, retries with exponential backoff and jitter.
package client
