package idempotency

import (
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// maxCachedBody is the largest stored answer the replay cache keeps: the
// cache is bounded by its entries times this (8 MiB per 1,024 entries);
// a larger answer is replayed from the database every time.
const maxCachedBody = 8 << 10

// expiryMargin is how long before a record's expiry the cache stops
// answering for it (the database decides then): the clock skew between
// replicas it tolerates.
const expiryMargin = 5 * time.Second

// replayCache keeps, on this replica, the completed records of recent
// replays, so that the next replay of one reads only its token row.
//
// It is safe because a completed record never changes while it is live:
// it is replayed as it is until it expires (nothing updates a completed
// record; a take-over and the pruner touch it only once expired), and
// `licensor keys rotate` re-seals the same answer. So each replica may keep
// its own copy, and no replica's copy is ever stale while live. What the
// cache must still honour, it checks on every hit:
//
//   - expiry: an entry is served only before the record's expires_at, on
//     the guard's clock, as a record read from the database is; after it,
//     the database decides (a take-over makes a new intent);
//   - the consumer: entries are keyed by the consumer, operation and key,
//     and the consumer is the one the token row read for this very request
//     names (the token is checked on every request, the cache never
//     answers for a revoked token);
//   - the body: a hit is replayed only for the same bytes (its body hash),
//     like any replay without a parse; anything else reads the record whole.
//
// Entries hold the answer decrypted, in this process's memory only; at
// rest it stays sealed. An entry outlives its record's expiry only until
// the next look-up of its key or until newer entries push it out: the
// process holds APP_KEY, which opens every sealed answer, all the same.
//
// Replicas judge expiry by their own clocks, as the database path does;
// a hit is refused expiryMargin before the record's expiry, so that a
// replica whose clock runs behind another's by less than that never
// replays from memory a record the other has already taken over.
type replayCache struct {
	entries *lru.Cache[scope, *Record]
	hits    atomic.Int64
}

// newReplayCache returns a cache of at most size records; nil (no cache)
// for size 0.
func newReplayCache(size int) *replayCache {
	if size <= 0 {
		return nil
	}
	c, err := lru.New[scope, *Record](size)
	if err != nil { // only for a size <= 0
		panic(err)
	}
	return &replayCache{entries: c}
}

// get returns the live completed record of sc, if the cache holds one.
func (c *replayCache) get(sc scope, now time.Time) *Record {
	if c == nil {
		return nil
	}
	r, ok := c.entries.Get(sc)
	if !ok {
		return nil
	}
	if r.expired(now.Add(expiryMargin)) {
		c.entries.Remove(sc)
		return nil
	}
	return r
}

// put keeps r, a live completed record this replica just replayed from the
// database. r is not changed afterwards: the cache shares it with every hit.
func (c *replayCache) put(r *Record) {
	if c == nil || r.Status != StatusCompleted || len(r.ResponseBody) > maxCachedBody {
		return
	}
	// Only what a replay reads (the prefetch's columns, however the record
	// was read, so that a hit answers alike): the record's other columns,
	// its sealed request above all, are not the cache's to hold.
	c.entries.Add(r.scope(), &Record{ID: r.ID, ConsumerID: r.ConsumerID, Operation: r.Operation, Key: r.Key,
		Status: r.Status, BodyHash: r.BodyHash, ResponseStatus: r.ResponseStatus, ResponseHeaders: r.ResponseHeaders,
		ResponseBody: r.ResponseBody, ExternalRef: r.ExternalRef, ExpiresAt: r.ExpiresAt})
}

// CachedReplays is how many replays this guard answered from its replay
// cache (see Config.ReplayCache).
func (g *Guard) CachedReplays() int64 {
	if g.cache == nil {
		return 0
	}
	return g.cache.hits.Load()
}
