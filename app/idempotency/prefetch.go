package idempotency

import (
	"database/sql"
	"time"

	"github.com/licensor-api/licensor/database"
)

// Prefetch is a keyed request's record, read with its token row (an
// auth.TokenRowJoin): a retry's two reads as one round trip, from one
// snapshot. Serve uses it only for the scope it serves.
type Prefetch struct {
	store     *Store
	operation string
	key       string
	cache     *replayCache
	now       func() time.Time

	// cached is the replay cache's record for the consumer the token
	// names, when it held one (and the join was left out).
	cached *Record

	// What the statement scanned: the token's consumer, and the replay's
	// columns of the record (NULL for none).
	consumer sql.NullString
	id       sql.NullInt64
	status   sql.NullString
	expires  *time.Time
	rec      Record
}

// Prefetch returns the read of the record of operation under key to make
// with the request's token row; nil without a valid key, which Serve answers.
func (g *Guard) Prefetch(operation, key string) *Prefetch {
	if !validKey(key) {
		return nil
	}
	return &Prefetch{store: g.cfg.Store, operation: operation, key: key, cache: g.cache, now: g.now}
}

// Needed implements auth.OptionalJoin: the record's read is left out of
// the token row's statement when this replica's replay cache holds the
// live completed record of the consumer the token names. That consumer is
// only a claim until the token row confirms it, which VerifyWith does
// before anything is answered; lookup checks it again against the
// principal.
func (p *Prefetch) Needed(consumerID string) bool {
	p.cached = p.cache.get(scope{ConsumerID: consumerID, Operation: p.operation, Key: p.key}, p.now())
	return p.cached == nil
}

// prefetchColumns and prefetchJoin are the Prefetch's part of the token
// row's statement: only what a replay needs. A record the request does not
// replay is read whole.
const (
	prefetchColumns = `t.consumer_id, k.id, k.status, k.body_hash, k.response_status, k.response_headers, k.response_body, k.external_ref, k.expires_at`
	prefetchJoin    = `LEFT JOIN idempotency_keys k ON k.consumer_id = t.consumer_id AND k.operation = ? AND k.idempotency_key = ?`
)

// Join implements auth.TokenRowJoin.
func (p *Prefetch) Join() (columns, join string) { return prefetchColumns, prefetchJoin }

// Args implements auth.TokenRowJoin.
func (p *Prefetch) Args() []any { return []any{p.operation, p.key} }

// Dest implements auth.TokenRowJoin.
func (p *Prefetch) Dest() []any {
	r := &p.rec
	return []any{&p.consumer, &p.id, &p.status, &r.BodyHash, &r.ResponseStatus, &r.ResponseHeaders, &r.ResponseBody,
		&r.ExternalRef, database.Time(&p.expires)}
}

// lookup is what the Prefetch read of sc's record: enough to replay it and
// to decide nothing else. False when it was not read for sc.
func (p *Prefetch) lookup(sc scope) (lookup, bool) {
	if p != nil && p.cached != nil {
		r := p.cached
		if r.ConsumerID != sc.ConsumerID || r.Operation != sc.Operation || r.Key != sc.Key {
			return lookup{}, false // not this request's: read it as Find does
		}
		return lookup{done: true, rec: r, cached: true}, true
	}
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
	if err := p.store.open(&r.ResponseBody, "response", r.ID); err != nil {
		return lookup{done: true, err: err}, true
	}
	return lookup{done: true, rec: &r}, true
}
