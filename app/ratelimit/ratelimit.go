// Package ratelimit is Laravel's `throttle:api` for licensor: a window per
// consumer that starts at its first request and lasts a minute (Laravel's
// RateLimiter::hit with a decay of 60 s; the first request after it starts
// the next), so that no 60 s span holds more than the limit, whatever the
// clock says. The counts live in one of three stores: in this
// process (memory: SQLite, which one process serves), in the database's
// rate_limits table, shared by every replica on it (database), or in Redis,
// shared by every replica that counts there (redis: Laravel's
// ThrottleRequestsWithRedis). The bootstrap chooses which. When a shared
// store cannot count a request, the process counts it in its own memory
// against its share of the limit: the limit degrades, it never lifts.
//
// It speaks GORM, go-redis and the standard library only; the HTTP layer
// calls Take once per authenticated request and turns the Result into
// headers and 429s.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
)

// Window is the length of one counting window, from a consumer's first
// request in it (to the second).
const Window = time.Minute

// The stores a Limiter counts in (Config.Store).
const (
	StoreMemory   = "memory"   // this process
	StoreDatabase = "database" // the rate_limits table of Config.DB
	StoreRedis    = "redis"    // the Redis at Config.RedisURL
)

// errNotCounted wraps a shared store's failure to count a request: the
// database failing in a way other than being unavailable in general
// (Config.Unavailable), or Redis failing in any way (down, unreachable, not
// answering within Config.RedisTimeout). The Limiter then counts the
// request in this process (see fallback): the limit degrades to this
// replica's share, it never lifts.
var errNotCounted = errors.New("ratelimit: the store did not count the request")

// Config is what a Limiter needs; New resolves its defaults.
type Config struct {
	// PerMinute is how many requests a consumer may make in one window; 0
	// (or less) turns the limiter off: Take counts nothing and returns a
	// Result with Limit 0, and no store is opened.
	PerMinute int
	// Store is where the counts live: StoreMemory (the default) counts in
	// this process; StoreDatabase in DB's rate_limits table, one upsert per
	// request, so that every replica on the database shares each
	// consumer's count; StoreRedis in the Redis at RedisURL, one round trip
	// per request, shared by every replica that counts there.
	Store string
	DB    *gorm.DB
	// Retry runs a statement again while it loses a lock conflict
	// (database.RetryOnConflict); nil runs it once.
	Retry func(ctx context.Context, stmt func() *gorm.DB) *gorm.DB
	// Unavailable reports whether a database error means the database is
	// unavailable in general (unreachable, not answering in time), which
	// the request would meet anyway: Take returns such an error as it is.
	// Every other failure is counted in this process (FallbackShare). nil:
	// none is unavailable.
	Unavailable func(error) bool
	// RedisURL is the Redis of StoreRedis (redis://host:port/db; see
	// redis.ParseURL). The Limiter owns the client it opens: Close closes it.
	RedisURL string
	// KeyPrefix begins every key of StoreRedis (default "licensor:rl:"; a
	// key is the prefix and the consumer id). Tests give each their own.
	KeyPrefix string
	// RedisTimeout bounds one count in Redis, from taking a connection to
	// the answer (DefaultRedisTimeout when 0): past it the request is
	// counted in this process instead (FallbackShare).
	RedisTimeout time.Duration
	// Batch is how many requests of a consumer the database and Redis
	// stores count in one round trip (RATE_LIMIT_BATCH): 1 (or less), each request its own
	// and the count exact; more, a process reserves that many of the
	// window's shared count at once and hands them out itself (see
	// batchCounter: the limit is never exceeded, the 429s may start up to
	// replicas·(Batch−1) requests early).
	Batch int
	// FallbackShare is the share of PerMinute this process allows a
	// consumer in a window while the shared store (database or Redis)
	// cannot count: in (0, 1], rounded to a whole number of requests, at
	// least 1; 0 (or outside it) is 1, the whole limit. With R replicas,
	// 1/R holds the fleet to the limit during an outage.
	FallbackShare float64
	// CountedLocally is called once for every request counted in this
	// process because the shared store could not count it (a metric); nil:
	// nothing.
	CountedLocally func()
	// Degraded is called with true when this process starts counting alone
	// and false when the store counts again (a gauge); nil: nothing.
	Degraded func(bool)
	Log      *slog.Logger // nil: discard
}

// Result is one request's standing in its consumer's window.
type Result struct {
	Limit     int // requests per window; 0: no limit (the limiter is off)
	Remaining int // requests left in the window after this one, never below 0
	// RetryAfter is how long until the window ends (a minute after its
	// first request), when the request is refused (0 when it is allowed).
	RetryAfter time.Duration
	Allowed    bool
	// Local says the request was counted in this process, against its
	// share of the limit (Limit), because the shared store could not.
	Local bool
}

// counter counts n more requests of consumer at now in its window (the one
// under way, or one starting at now when the last has ended) and returns
// the window's count, these requests included, and its start. The start
// may be the zero time while the count is at most dateAbove: nothing reads
// it then. An error it returns is either errNotCounted wrapping the cause
// (the request is counted in this process instead) or one the request
// fails with.
type counter interface {
	hit(ctx context.Context, consumer string, now time.Time, n, dateAbove int64) (hits int64, start time.Time, err error)
}

// over reports whether a window that started at start is over at now: a
// window runs for Window from its start, to the second, as Laravel's
// RateLimiter dates its timer in whole seconds.
func over(start, now time.Time) bool {
	return !now.Truncate(time.Second).Before(start.Add(Window))
}

// windowStart is the start of a window a request at now begins.
func windowStart(now time.Time) time.Time { return now.UTC().Truncate(time.Second) }

// Limiter counts requests per consumer and window.
type Limiter struct {
	cfg     Config
	counter counter
	close   func() error // the store's, when the Limiter opened one
	local   *fallback    // a shared store's; nil for memory
}

// New returns a Limiter on the configured store; it fails on an unknown
// store or a RedisURL go-redis cannot read (the error never shows a
// password). It opens no connection: a Redis that is down is met by the
// first request.
func New(cfg Config) (*Limiter, error) {
	if cfg.Retry == nil {
		cfg.Retry = func(_ context.Context, stmt func() *gorm.DB) *gorm.DB { return stmt() }
	}
	if cfg.Unavailable == nil {
		cfg.Unavailable = func(error) bool { return false }
	}
	if cfg.RedisTimeout <= 0 {
		cfg.RedisTimeout = DefaultRedisTimeout
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = DefaultKeyPrefix
	}
	if cfg.FallbackShare <= 0 || cfg.FallbackShare > 1 {
		cfg.FallbackShare = 1
	}
	if cfg.CountedLocally == nil {
		cfg.CountedLocally = func() {}
	}
	if cfg.Degraded == nil {
		cfg.Degraded = func(bool) {}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Store == "" {
		cfg.Store = StoreMemory
	}
	l := &Limiter{cfg: cfg, close: func() error { return nil }}
	if cfg.PerMinute <= 0 {
		return l, nil
	}
	switch cfg.Store {
	case StoreMemory:
		l.counter = newMemoryCounter()
	case StoreDatabase:
		l.counter = newSQLCounter(cfg)
	case StoreRedis:
		r, err := newRedisCounter(cfg)
		if err != nil {
			return nil, err
		}
		l.counter, l.close = r, r.close
	default:
		return nil, fmt.Errorf("ratelimit: unknown store %q", cfg.Store)
	}
	if cfg.Store != StoreMemory { // a shared store
		if cfg.Batch > 1 {
			l.counter = newBatchCounter(l.counter, int64(cfg.Batch))
		}
		l.local = newFallback(cfg)
	}
	return l, nil
}

// Close closes what the Limiter opened (the Redis client). Take must not
// be called after it.
func (l *Limiter) Close() error { return l.close() }

// Take counts one request of consumerID at now and says whether it is
// within the limit. A request the shared store could not count is counted
// in this process, against its share of the limit (Result.Local; the
// Limiter logs it once a Window at most and reports it to
// Config.CountedLocally). On error the request was not counted: the
// database's own when Config.Unavailable says it is unavailable, which the
// request would meet anyway, or ctx's when it has ended.
func (l *Limiter) Take(ctx context.Context, consumerID string, now time.Time) (Result, error) {
	if l.counter == nil {
		return Result{Allowed: true}, nil
	}
	limit, local := l.cfg.PerMinute, false
	hits, start, err := l.counter.hit(ctx, consumerID, now, 1, int64(limit))
	switch {
	case errors.Is(err, errNotCounted):
		hits, start = l.local.hit(consumerID, now, err)
		limit, local = l.local.limit, true
	case err != nil:
		return Result{}, err
	case l.local != nil:
		l.local.shared(now)
	}
	r := Result{Limit: limit, Remaining: int(max(int64(limit)-hits, 0)), Allowed: hits <= int64(limit), Local: local}
	if !r.Allowed {
		r.RetryAfter = start.Add(Window).Sub(now)
	}
	return r, nil
}
