package database

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"gorm.io/gorm"
)

// The rate_limits table holds one row per consumer and counting window
// (its start), with the window's hits: the rate limiter's count, shared by
// every replica on the database.
const (
	mysqlRateHit = "INSERT INTO rate_limits (consumer_id, window_start, hits) VALUES (?, ?, LAST_INSERT_ID(?)) " +
		"ON DUPLICATE KEY UPDATE hits = LAST_INSERT_ID(hits + ?)"
	sqliteRateHit = "INSERT INTO rate_limits (consumer_id, window_start, hits) VALUES (?, ?, ?) " +
		"ON CONFLICT (consumer_id, window_start) DO UPDATE SET hits = hits + excluded.hits RETURNING hits"
	mysqlRatePrune  = "DELETE FROM rate_limits WHERE window_start < ? LIMIT ?"
	sqliteRatePrune = "DELETE FROM rate_limits WHERE rowid IN (SELECT rowid FROM rate_limits WHERE window_start < ? LIMIT ?)"
)

var errNoRateCount = errors.New("database: the rate_limits upsert returned no count")

// HitRateWindow counts n more hits of consumer (n ≥ 1) in the window
// starting at window, in the rate_limits table, and sets *hits to the
// window's count, these hits included. It is one upsert, one round trip, and safe to run again
// after a lock conflict (RetryOnConflict); the *gorm.DB it returns carries
// its Error.
//
// On MySQL / MariaDB the upsert hands back the new count through
// LAST_INSERT_ID(expr), whose value the server sends to the client in the
// statement's OK packet as the insert id (sql.Result.LastInsertId). The row
// lock the upsert takes makes the hits of concurrent requests queue, so each
// sees its own count. On SQLite, RETURNING does the same. A server that
// sends no count back is an error.
//
// The upsert is a statement prepared once per connection of the pool (not
// GORM: it runs on every request the limit counts), so db must be a
// database Open opened.
func HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, window time.Time, n int64, hits *int64) *gorm.DB {
	c, ok := db.Dialector.(classifying)
	if !ok || c.rate == nil {
		return &gorm.DB{Error: errNotOpened}
	}
	q := c.rate.of(db)
	var err error
	if db.Dialector.Name() == MySQL {
		var res sql.Result
		if res, err = q.Exec(ctx, consumer, window, n, n); err == nil {
			*hits, err = res.LastInsertId()
		}
	} else {
		err = q.Row(ctx, []any{hits}, consumer, window, n)
	}
	if err == nil && *hits < n {
		err = errNoRateCount
	}
	return &gorm.DB{Error: err}
}

// errNotOpened is a *gorm.DB that Open did not open.
var errNotOpened = errors.New("database: HitRateWindow needs a database Open opened")

// rateQuery is a pool's rate_limits upsert, made on first use.
type rateQuery struct {
	once sync.Once
	q    *Query
}

// of is the upsert on db's pool, in db's dialect.
func (r *rateQuery) of(db *gorm.DB) *Query {
	r.once.Do(func() {
		text := sqliteRateHit
		if db.Dialector.Name() == MySQL {
			text = mysqlRateHit
		}
		r.q = NewQuery(db.WithContext(context.Background()), text) // not the first caller's context

	})
	return r.q
}

// PruneRateWindows deletes at most limit rows of the rate_limits table whose
// window started before before; the *gorm.DB it returns carries its Error
// and, in RowsAffected, how many it deleted. It is one statement, safe to
// run again after a lock conflict (RetryOnConflict).
func PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB {
	stmt := sqliteRatePrune
	if db.Dialector.Name() == MySQL {
		stmt = mysqlRatePrune
	}
	return db.WithContext(ctx).Exec(stmt, before, limit)
}

// The dialector implements app/ratelimit's windowStatements.
var _ interface {
	HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, window time.Time, n int64, hits *int64) *gorm.DB
	PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB
} = classifying{}

// HitRateWindow is the package function, offered by the dialector of every
// database Open returns to the packages that speak GORM but may not import
// this one (app/ratelimit).
func (classifying) HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, window time.Time, n int64, hits *int64) *gorm.DB {
	return HitRateWindow(ctx, db, consumer, window, n, hits)
}

// PruneRateWindows is the package function, offered by the dialector like
// HitRateWindow.
func (classifying) PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB {
	return PruneRateWindows(ctx, db, before, limit)
}
