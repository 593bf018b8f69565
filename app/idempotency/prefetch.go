package idempotency

import (
	"database/sql"
	"time"

	"github.com/licensor-api/licensor/database"
)

// Prefetch is a keyed request's record, read ahead of the guard in the
// statement that reads its token row: a retry's two reads (the token row and
// the record) as one round trip, from one snapshot. It is an auth.Joined,
// which auth.Service's VerifyWith reads; Operation.Serve then takes it in
// place of its own first read. The record is read on the token row's
// consumer (t.consumer_id), and Serve uses it only for the scope it serves:
// that consumer, its operation and its key.
type Prefetch struct {
	store     *Store
	operation string
	key       string

	// What the statement scanned: the token's consumer, and the replay's
	// columns of the record, all NULL when there is none.
	consumer sql.NullString
	id       sql.NullInt64
	status   sql.NullString
	expires  *time.Time
	rec      Record
}

// Prefetch returns the read of the record of operation under key to make
// with the request's token row, or nil when there is no valid key (Serve
// then answers for the key, as it would without a Prefetch).
func (g *Guard) Prefetch(operation, key string) *Prefetch {
	if !validKey(key) {
		return nil
	}
	return &Prefetch{store: g.cfg.Store, operation: operation, key: key}
}

// prefetchColumns and prefetchJoin are the Prefetch's part of the token
// row's statement: what a replay needs of the record of the token's
// consumer's scope (whether it may answer: its status, the hash of the bytes
// it executed, when it expires; and what it answers with), and nothing
// more. A record the request does not replay is read whole (Find).
const (
	prefetchColumns = `t.consumer_id, k.id, k.status, k.body_hash, k.response_status, k.response_headers, k.response_body, k.external_ref, k.expires_at`
	prefetchJoin    = `LEFT JOIN idempotency_keys k ON k.consumer_id = t.consumer_id AND k.operation = ? AND k.idempotency_key = ?`
)

// Join implements auth.Joined.
func (p *Prefetch) Join() (columns, join string) { return prefetchColumns, prefetchJoin }

// Args implements auth.Joined.
func (p *Prefetch) Args() []any { return []any{p.operation, p.key} }

// Dest implements auth.Joined.
func (p *Prefetch) Dest() []any {
	r := &p.rec
	return []any{&p.consumer, &p.id, &p.status, &r.BodyHash, &r.ResponseStatus, &r.ResponseHeaders, &r.ResponseBody,
		&r.ExternalRef, database.Time(&p.expires)}
}

// lookup is what the Prefetch read of sc's record: its ID, Status,
// BodyHash, response, ExternalRef and ExpiresAt, its scope's fields from sc,
// enough to replay it and to decide nothing else. False when it was not
// read for sc (not read at all, or for another scope), and the guard reads
// the record itself.
func (p *Prefetch) lookup(sc scope) (lookup, bool) {
	if p == nil || !p.consumer.Valid || p.consumer.String != sc.ConsumerID || p.operation != sc.Operation || p.key != sc.Key {
		return lookup{}, false
	}
	if !p.id.Valid {
		return lookup{done: true}, true // no record
	}
	if !p.status.Valid || p.expires == nil {
		return lookup{}, false // not a row of the table: read it as Find does
	}
	r := p.rec
	r.ID, r.Status, r.ExpiresAt = uint64(p.id.Int64), p.status.String, *p.expires
	r.ConsumerID, r.Operation, r.Key = sc.ConsumerID, sc.Operation, sc.Key
	if err := p.store.openBody(&r); err != nil {
		return lookup{done: true, err: err}, true
	}
	return lookup{done: true, rec: &r}, true
}
