package database

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"gorm.io/gorm"
)

// The rate_limits table holds one row per consumer: the start of its
// current window (Unix seconds) and the window's hits, the rate limiter's
// count, shared by every replica on the database. A window starts at the
// consumer's first request and lasts a given length (Laravel's
// RateLimiter::hit); the first request after it starts the next one. The
// CASEs read the row as it was: MySQL assigns left to right, so hits is
// set before window_start changes; SQLite reads the old row throughout.
const (
	mysqlRateHit = "INSERT INTO rate_limits (consumer_id, window_start, hits) VALUES (?, ?, LAST_INSERT_ID(?)) " +
		"ON DUPLICATE KEY UPDATE hits = LAST_INSERT_ID(IF(window_start <= ?, ?, hits + ?)), " +
		"window_start = IF(window_start <= ?, ?, window_start)"
	sqliteRateHit = "INSERT INTO rate_limits (consumer_id, window_start, hits) VALUES (?, ?, ?) " +
		"ON CONFLICT (consumer_id) DO UPDATE SET " +
		"hits = CASE WHEN window_start <= ? THEN excluded.hits ELSE hits + excluded.hits END, " +
		"window_start = CASE WHEN window_start <= ? THEN excluded.window_start ELSE window_start END " +
		"RETURNING hits, window_start"
	rateStart       = "SELECT window_start FROM rate_limits WHERE consumer_id = ?"
	mysqlRatePrune  = "DELETE FROM rate_limits WHERE window_start < ? LIMIT ?"
	sqliteRatePrune = "DELETE FROM rate_limits WHERE rowid IN (SELECT rowid FROM rate_limits WHERE window_start < ? LIMIT ?)"
)

var errNoRateCount = errors.New("database: the rate_limits upsert returned no count")

// HitRateWindow counts n ≥ 1 more hits of consumer at now in its window of
// length window (the one under way, or a new one from now). It sets *hits to
// the window's count, these included, and *start to the window's start, or to
// the zero time when the statement cannot tell (on MySQL, a window another
// request started: see RateWindowStart). One upsert, safe to run again after
// a lock conflict; db must come from Open, whose pool holds it prepared.
//
// On MySQL the count comes back through LAST_INSERT_ID(expr), in the OK
// packet's insert id; a count of n is a window these hits started. The row
// lock queues concurrent hits, so each sees its own count. On SQLite,
// RETURNING hands back both.
func HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, now time.Time, window time.Duration, n int64, hits *int64, start *time.Time) *gorm.DB {
	c, ok := db.Dialector.(classifying)
	if !ok || c.rate == nil {
		return &gorm.DB{Error: errNotOpened}
	}
	q := c.rate.of(db)
	at := now.Unix()
	over := at - int64(window/time.Second) // a window that started then or before is over
	var err error
	*start = time.Time{}
	if db.Dialector.Name() == MySQL {
		var res sql.Result
		if res, err = q.Exec(ctx, consumer, at, n, over, n, n, over, at); err == nil {
			*hits, err = res.LastInsertId()
		}
		if err == nil && *hits == n {
			*start = time.Unix(at, 0).UTC()
		}
	} else {
		var began int64
		if err = q.Row(ctx, []any{hits, &began}, consumer, at, n, over, over); err == nil {
			*start = time.Unix(began, 0).UTC()
		}
	}
	if err == nil && *hits < n {
		err = errNoRateCount
	}
	return &gorm.DB{Error: err}
}

// RateWindowStart sets *start to the start of consumer's current window, for
// a count HitRateWindow could not date.
func RateWindowStart(ctx context.Context, db *gorm.DB, consumer string, start *time.Time) *gorm.DB {
	var began int64
	res := db.WithContext(ctx).Raw(rateStart, consumer).Scan(&began)
	if res.Error == nil {
		*start = time.Unix(began, 0).UTC()
	}
	return res
}

var errNotOpened = errors.New("database: HitRateWindow needs a database Open opened")

// rateQuery is a pool's rate_limits upsert, made on first use.
type rateQuery struct {
	once sync.Once
	q    *Query
}

func (r *rateQuery) of(db *gorm.DB) *Query {
	r.once.Do(func() {
		r.q = NewQuery(db.WithContext(context.Background()), forDialect(db, sqliteRateHit, mysqlRateHit)) // not the first caller's context
	})
	return r.q
}

// PruneRateWindows deletes at most limit rows whose window started before
// before (RowsAffected says how many). One statement, safe to run again.
func PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB {
	return db.WithContext(ctx).Exec(forDialect(db, sqliteRatePrune, mysqlRatePrune), before.Unix(), limit)
}

// The dialector implements app/ratelimit's windowStatements.
var _ interface {
	HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, now time.Time, window time.Duration, n int64, hits *int64, start *time.Time) *gorm.DB
	RateWindowStart(ctx context.Context, db *gorm.DB, consumer string, start *time.Time) *gorm.DB
	PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB
} = classifying{}

// HitRateWindow is the package function, offered through the dialector to
// packages that may not import this one (app/ratelimit).
func (classifying) HitRateWindow(ctx context.Context, db *gorm.DB, consumer string, now time.Time, window time.Duration, n int64, hits *int64, start *time.Time) *gorm.DB {
	return HitRateWindow(ctx, db, consumer, now, window, n, hits, start)
}

// RateWindowStart is the package function, like HitRateWindow.
func (classifying) RateWindowStart(ctx context.Context, db *gorm.DB, consumer string, start *time.Time) *gorm.DB {
	return RateWindowStart(ctx, db, consumer, start)
}

// PruneRateWindows is the package function, like HitRateWindow.
func (classifying) PruneRateWindows(ctx context.Context, db *gorm.DB, before time.Time, limit int) *gorm.DB {
	return PruneRateWindows(ctx, db, before, limit)
}
