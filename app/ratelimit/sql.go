package ratelimit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// sqlCounter counts in the rate_limits table: one row per consumer and
// window, one upsert per request, which every replica on the database
// shares.
//
// On MySQL / MariaDB the upsert hands back the new count in the same round
// trip: hits is set through LAST_INSERT_ID(expr), whose value the server
// sends to the client in the statement's OK packet as the insert id
// (sql.Result.LastInsertId). The row lock the upsert takes makes the
// increments of concurrent requests queue, so each sees its own count. On
// SQLite (used by tests alone: in production SQLite counts in memory),
// RETURNING does the same.
//
// Rows of windows that are over are deleted opportunistically: the first
// request of each window in each process deletes one small batch of the rows
// older than the previous window (kept for replicas whose clocks lag), and
// while a batch comes back full the next request deletes another.
type sqlCounter struct {
	cfg    Config
	mysql  bool
	pruned atomic.Int64 // the window (Unix seconds) up to which this process has pruned
}

func newSQLCounter(cfg Config) *sqlCounter {
	return &sqlCounter{cfg: cfg, mysql: cfg.DB.Dialector.Name() == "mysql"}
}

const (
	mysqlUpsert = "INSERT INTO rate_limits (consumer_id, window_start, hits) VALUES (?, ?, LAST_INSERT_ID(1)) " +
		"ON DUPLICATE KEY UPDATE hits = LAST_INSERT_ID(hits + 1)"
	sqliteUpsert = "INSERT INTO rate_limits (consumer_id, window_start, hits) VALUES (?, ?, 1) " +
		"ON CONFLICT (consumer_id, window_start) DO UPDATE SET hits = hits + 1 RETURNING hits"
	mysqlPrune  = "DELETE FROM rate_limits WHERE window_start < ? LIMIT ?"
	sqlitePrune = "DELETE FROM rate_limits WHERE rowid IN (SELECT rowid FROM rate_limits WHERE window_start < ? LIMIT ?)"
)

var errNoCount = errors.New("ratelimit: the upsert returned no count")

func (s *sqlCounter) hit(ctx context.Context, consumer string, window time.Time) (int64, error) {
	var hits int64
	res := s.cfg.Retry(ctx, func() *gorm.DB {
		db := s.cfg.DB.WithContext(ctx)
		if !s.mysql {
			return db.Raw(sqliteUpsert, consumer, window).Scan(&hits)
		}
		r := gorm.WithResult()
		tx := db.Clauses(r).Exec(mysqlUpsert, consumer, window)
		if tx.Error == nil {
			hits, tx.Error = r.Result.LastInsertId()
		}
		return tx
	})
	if res.Error != nil {
		return 0, res.Error
	}
	if hits < 1 { // a server that did not send the count back
		return 0, errNoCount
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
	stmt := sqlitePrune
	if s.mysql {
		stmt = mysqlPrune
	}
	before := window.Add(-Window)
	res := s.cfg.Retry(ctx, func() *gorm.DB {
		return s.cfg.DB.WithContext(ctx).Exec(stmt, before, s.cfg.PruneBatch)
	})
	switch {
	case res.Error != nil:
		s.cfg.Log.Warn("rate limit: delete the counters of past windows", "error", res.Error)
	case res.RowsAffected >= int64(s.cfg.PruneBatch):
		s.pruned.CompareAndSwap(now, last) // more are left: the next request deletes another batch
	}
}
