// Package ratelimit is Laravel's `throttle:api` for licensor: a fixed
// one-minute window per consumer, counted either in the database, shared by
// every replica on it (MySQL), or in this process (SQLite, a single-process
// embedded database). The bootstrap chooses which.
//
// It speaks GORM and the standard library only; the HTTP layer calls Take
// once per authenticated request and turns the Result into headers and 429s.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
)

// Window is the length of one counting window.
const Window = time.Minute

// ErrNotCounted wraps a failure to count a request that is not the database
// being unavailable in general (Config.Unavailable): the caller serves the
// request without a limit (fails open) and logs it.
var ErrNotCounted = errors.New("ratelimit: the request was not counted")

// Config is what a Limiter needs; New resolves its defaults.
type Config struct {
	// PerMinute is how many requests a consumer may make in one window; 0
	// (or less) turns the limiter off: Take counts nothing and returns a
	// Result with Limit 0.
	PerMinute int
	// Shared counts in DB's rate_limits table, one upsert per request, so
	// that every replica on the database shares each consumer's count.
	// Otherwise the counters live in this process, and DB is not used.
	Shared bool
	DB     *gorm.DB
	// Retry runs a statement again while it loses a lock conflict
	// (database.RetryOnConflict); nil runs it once.
	Retry func(ctx context.Context, stmt func() *gorm.DB) *gorm.DB
	// Unavailable reports whether a database error means the database is
	// unavailable in general (unreachable, not answering in time), which
	// the request would meet anyway: Take returns such an error as it is.
	// Every other failure is wrapped in ErrNotCounted. nil: none is.
	Unavailable func(error) bool
	// PruneBatch is how many rows of windows that are over one pass
	// deletes; default 500.
	PruneBatch int
	Log        *slog.Logger // nil: discard
}

// Result is one request's standing in its consumer's window.
type Result struct {
	Limit     int // requests per window; 0: no limit (the limiter is off)
	Remaining int // requests left in the window after this one, never below 0
	// RetryAfter is how long until the window ends, when the request is
	// refused (0 when it is allowed).
	RetryAfter time.Duration
	Allowed    bool
}

// counter counts one more request of consumer in the window starting at
// window and returns the window's count, this request included.
type counter interface {
	hit(ctx context.Context, consumer string, window time.Time) (int64, error)
}

// Limiter counts requests per consumer and window.
type Limiter struct {
	cfg     Config
	counter counter
}

// New returns a Limiter.
func New(cfg Config) *Limiter {
	if cfg.Retry == nil {
		cfg.Retry = func(_ context.Context, stmt func() *gorm.DB) *gorm.DB { return stmt() }
	}
	if cfg.Unavailable == nil {
		cfg.Unavailable = func(error) bool { return false }
	}
	if cfg.PruneBatch <= 0 {
		cfg.PruneBatch = 500
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{cfg: cfg}
	switch {
	case cfg.PerMinute <= 0:
	case cfg.Shared:
		l.counter = newSQLCounter(cfg)
	default:
		l.counter = newMemoryCounter()
	}
	return l
}

// Take counts one request of consumerID at now and says whether it is
// within the limit. On error the request was not counted: the error is the
// database's own when Config.Unavailable says the database is unavailable or
// ctx has ended, and otherwise ErrNotCounted wrapping it.
func (l *Limiter) Take(ctx context.Context, consumerID string, now time.Time) (Result, error) {
	if l.counter == nil {
		return Result{Allowed: true}, nil
	}
	window := now.UTC().Truncate(Window)
	hits, err := l.counter.hit(ctx, consumerID, window)
	if err != nil {
		if l.cfg.Unavailable(err) || ctx.Err() != nil { // down, or the caller gave up
			return Result{}, err
		}
		return Result{}, fmt.Errorf("%w: %w", ErrNotCounted, err)
	}
	limit := int64(l.cfg.PerMinute)
	r := Result{Limit: l.cfg.PerMinute, Remaining: int(max(limit-hits, 0)), Allowed: hits <= limit}
	if !r.Allowed {
		r.RetryAfter = window.Add(Window).Sub(now)
	}
	return r, nil
}
