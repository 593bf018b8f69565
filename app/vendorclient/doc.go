// Package vendorclient holds the drivers that satisfy licenses.Vendor: the
// http driver that speaks the vendor protocol, an in-memory fake, and the
// simulator, an http.Handler that serves the same protocol from memory with
// faults on demand: seeded random 429s, 5xx and dropped answers before or
// after the commit, changed while it runs (POST /_sim/faults), its counts
// over HTTP (GET /_sim/stats), POST /_sim/reset, and optionally its sites
// kept in a state file across restarts; it pages its whole site list
// (GET /sites?page=&per_page=), and sends signed webhooks when a site is
// changed on its side (POST /_sim/sites/{id}/suspend|reactivate|delete|rotate)
// (docs/operations.md, "Vendor simulator").
//
// The vendor protocol is JSON over HTTP under VENDOR_URL, each request with
// "Authorization: Bearer VENDOR_TOKEN": GET /sites?domain=D lists sites
// ({"data":[site…]}), POST /sites {"name","domain"} creates one (201,
// {"data":site}), DELETE /sites/{id} deletes one (204; 404 is already
// gone), and a 429 may carry Retry-After. A site is {"id", "name",
// "domain", "license_key", "status", "created_at"}. licensor's own API, built
// on it, is docs/api.md.
//
// The vendor offers no idempotency key, so the http driver retries only a
// 429 and classifies every other failure: unavailable (nothing happened),
// rejected (refused, nothing happened) or uncertain (a write was sent and
// its outcome is unknown).
package vendorclient
