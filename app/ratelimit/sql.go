package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// sqlCounter counts in the rate_limits table: one row per consumer and
// window, one upsert per request (or per Config.Batch requests, through a
// batchCounter), which every replica on the database shares. The statements are package database's (database.HitRateWindow and
// database.PruneRateWindows), which this package, importing nothing of the
// module, finds on the dialector of the database it is given (see
// windowStatements).
//
// Rows of windows that are over are deleted opportunistically: the first
// request of each window in each process deletes one small batch of the rows
// older than the previous window (kept for replicas whose clocks lag), and
// while a batch comes back full the next request deletes another.
type sqlCounter struct {
	cfg    Config
	stmts  windowStatements // nil: the database offers none
	pruned atomic.Int64     // the window (Unix seconds) up to which this process has pruned
}

// windowStatements are the rate_limits table's statements, which the
// dialector of every database package database opens implements: one hit
// that sets *hits to the window's count, and one batch of a prune whose
// RowsAffected says how many rows it deleted. Each is one statement, safe
// to run again after a lock conflict.
type windowStatements interface {
	HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, window time.Time, n int64, hits *int64) *gorm.DB
	PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB
}

var (
	_ counter  = (*sqlCounter)(nil)
	_ reserver = (*sqlCounter)(nil)
)

func newSQLCounter(cfg Config) *sqlCounter {
	stmts, _ := cfg.DB.Dialector.(windowStatements)
	return &sqlCounter{cfg: cfg, stmts: stmts}
}

// errNoStatements is a database not opened by package database, which
// offers no rate_limits statements.
var errNoStatements = errors.New("ratelimit: the database offers no rate_limits statements")

// hit counts the request in its row.
func (s *sqlCounter) hit(ctx context.Context, consumer string, window time.Time) (int64, error) {
	return s.reserve(ctx, consumer, window, 1)
}

// reserve adds n to consumer's count in its row and returns the count after.
// A failure is the database's own error when the database is unavailable in
// general (Config.Unavailable), which the request would meet anyway, or
// when ctx has ended; any other is errNotCounted wrapping it.
func (s *sqlCounter) reserve(ctx context.Context, consumer string, window time.Time, n int64) (int64, error) {
	if s.stmts == nil {
		return 0, fmt.Errorf("%w: %w", errNotCounted, errNoStatements)
	}
	var hits int64
	res := s.cfg.Retry(ctx, func() *gorm.DB {
		return s.stmts.HitRateWindow(ctx, s.cfg.DB, consumer, window, n, &hits)
	})
	if err := res.Error; err != nil {
		if s.cfg.Unavailable(err) || ctx.Err() != nil { // down, or the caller gave up
			return 0, err
		}
		return 0, fmt.Errorf("%w: %w", errNotCounted, err)
	}
	s.prune(ctx, window)
	return hits, nil
}

// prune deletes one batch of the rows of windows before the previous one,
// once per window per process (again while batches come back full). A
// failure is logged and left for the next window.
func (s *sqlCounter) prune(ctx context.Context, window time.Time) {
	last, now := s.pruned.Load(), window.Unix()
	if now <= last || !s.pruned.CompareAndSwap(last, now) {
		return
	}
	before := window.Add(-Window)
	res := s.cfg.Retry(ctx, func() *gorm.DB {
		return s.stmts.PruneRateWindows(ctx, s.cfg.DB, before, s.cfg.PruneBatch)
	})
	switch {
	case res.Error != nil:
		s.cfg.Log.Warn("rate limit: delete the counters of past windows", "error", res.Error)
	case res.RowsAffected >= int64(s.cfg.PruneBatch):
		s.pruned.CompareAndSwap(now, last) // more are left: the next request deletes another batch
	}
}
