// Package vendorsim is a simulator of the upstream vendor: an http.Handler
// that serves the vendor protocol (package vendorproto) from memory, for
// `licensor vendor-sim`, tests, demos and chaos runs. It is a vendor of its
// own, apart from the application: it imports nothing of licensor but the
// protocol (and internal/wait's pause), and only app/console imports it.
//
// It serves faults on demand: seeded random 429s, 5xx and dropped answers
// before or after the commit, changed while it runs (POST /_sim/faults),
// its counts over HTTP (GET /_sim/stats), POST /_sim/reset, and optionally
// its sites kept in a state file across restarts; it pages its whole site
// list (GET /sites?page=&per_page=), and sends signed webhooks when a site
// is changed on its side (POST /_sim/sites/{id}/suspend|reactivate|delete|rotate)
// or by a call that changes it (docs/operations.md, "Vendor simulator").
// It serves every call of vendorproto.Calls (routes.go).
package vendorsim
