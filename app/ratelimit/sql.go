package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// sqlCounter counts in the rate_limits table: one row per consumer (its
// window's start and count), one upsert per request (or per Config.Batch
// requests, through a batchCounter), which every replica on the database
// shares. The statements are package database's (database.HitRateWindow,
// database.RateWindowStart and database.PruneRateWindows), which this
// package, importing nothing of the module, finds on the dialector of the
// database it is given (see windowStatements).
//
// Rows of consumers not seen for two windows are deleted opportunistically:
// the first request of each clock minute in each process deletes one small
// batch of them, and while a batch comes back full the next request
// deletes another.
type sqlCounter struct {
	cfg        Config
	stmts      windowStatements // nil: the database offers none
	pruned     atomic.Int64     // the clock minute (Unix seconds) up to which this process has pruned
	pruneBatch int              // how many rows of windows that are over one prune deletes
}

// windowStatements are the rate_limits table's statements, which the
// dialector of every database package database opens implements: one hit
// that sets *hits to the window's count and *start to its start (zero when
// the statement cannot tell), one read of a window's start, and one batch
// of a prune whose RowsAffected says how many rows it deleted. Each is one
// statement, safe to run again after a lock conflict.
type windowStatements interface {
	HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, now time.Time, window time.Duration, n int64, hits *int64, start *time.Time) *gorm.DB
	RateWindowStart(ctx context.Context, db *gorm.DB, consumer string, start *time.Time) *gorm.DB
	PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB
}

func newSQLCounter(cfg Config) *sqlCounter {
	stmts, _ := cfg.DB.Dialector.(windowStatements)
	return &sqlCounter{cfg: cfg, stmts: stmts, pruneBatch: 500}
}

// errNoStatements is a database not opened by package database, which
// offers no rate_limits statements.
var errNoStatements = errors.New("ratelimit: the database offers no rate_limits statements")

func (s *sqlCounter) hit(ctx context.Context, consumer string, now time.Time, n, dateAbove int64) (int64, time.Time, error) {
	if s.stmts == nil {
		return 0, time.Time{}, fmt.Errorf("%w: %w", errNotCounted, errNoStatements)
	}
	var hits int64
	var start time.Time
	res := s.cfg.Retry(ctx, func() *gorm.DB {
		return s.stmts.HitRateWindow(ctx, s.cfg.DB, consumer, now, Window, n, &hits, &start)
	})
	if res.Error == nil && start.IsZero() && hits > dateAbove {
		res = s.cfg.Retry(ctx, func() *gorm.DB {
			return s.stmts.RateWindowStart(ctx, s.cfg.DB, consumer, &start)
		})
		if now.Before(start) {
			// The window ended and another request began the next one
			// between the two statements: the hits were the last window's.
			start = start.Add(-Window)
		}
	}
	if err := res.Error; err != nil {
		if s.cfg.Unavailable(err) || ctx.Err() != nil { // down, or the caller gave up
			return 0, time.Time{}, err
		}
		return 0, time.Time{}, fmt.Errorf("%w: %w", errNotCounted, err)
	}
	s.prune(ctx, now)
	return hits, start, nil
}

// prune deletes one batch of the rows of consumers whose window ended more
// than a Window ago, once per clock minute per process (again while
// batches come back full). A failure is logged and left for the next
// minute.
func (s *sqlCounter) prune(ctx context.Context, now time.Time) {
	minute := now.UTC().Truncate(Window)
	last, at := s.pruned.Load(), minute.Unix()
	if at <= last || !s.pruned.CompareAndSwap(last, at) {
		return
	}
	before := minute.Add(-2 * Window)
	res := s.cfg.Retry(ctx, func() *gorm.DB {
		return s.stmts.PruneRateWindows(ctx, s.cfg.DB, before, s.pruneBatch)
	})
	switch {
	case res.Error != nil:
		s.cfg.Log.Warn("rate limit: delete the counters of past windows", "error", res.Error)
	case res.RowsAffected >= int64(s.pruneBatch):
		s.pruned.CompareAndSwap(at, last) // more are left: the next request deletes another batch
	}
}
