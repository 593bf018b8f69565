package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/config"
)

// ErrNoRows is what Query.Row answers when the query matches no row.
var ErrNoRows = sql.ErrNoRows

// Query is one hot statement every request makes (the token row, an
// idempotency record): plain SQL, prepared once per connection and scanned
// without reflection, where GORM builds, parses and reflects on every call.
// Like a GORM statement it runs within DB_QUERY_TIMEOUT and its "not now"
// errors are an UnavailableError.
type Query struct {
	db           *gorm.DB
	text         string
	timeout      time.Duration
	waitsBounded bool // see statementContext

	mu   sync.Mutex               // serialises the first preparation
	stmt atomic.Pointer[sql.Stmt] // nil until the first call prepares it
}

// NewQuery returns text (with ? placeholders) on db's pool. Nothing is
// prepared until it runs.
func NewQuery(db *gorm.DB, text string) *Query {
	sqlite := db != nil && db.Dialector != nil && db.Dialector.Name() == SQLite
	return &Query{db: db, text: text, timeout: statementTimeoutOf(db), waitsBounded: sqlite}
}

// Row scans the first row into dest, or returns ErrNoRows.
func (q *Query) Row(ctx context.Context, dest []any, args ...any) error {
	ctx, cancel := q.bounded(ctx)
	defer cancel()
	stmt, err := q.prepared(ctx)
	if err != nil {
		return classify(err)
	}
	err = stmt.QueryRowContext(ctx, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoRows
	}
	return classify(err)
}

// Exec runs the statement (a write) and returns its result.
func (q *Query) Exec(ctx context.Context, args ...any) (sql.Result, error) {
	ctx, cancel := q.bounded(ctx)
	defer cancel()
	stmt, err := q.prepared(ctx)
	if err != nil {
		return nil, classify(err)
	}
	res, err := stmt.ExecContext(ctx, args...)
	return res, classify(err)
}

func (q *Query) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return statementContext(ctx, q.timeout, q.waitsBounded)
}

// statementContext is the context a statement runs on, Query's and GORM's
// (boundStatements) alike: ctx itself when its deadline is sooner (a caller
// such as /readyz keeps its tighter bound); else ctx with timeout, so that
// on MySQL the driver gives up on a frozen server.
//
// With waitsBounded (SQLite) it is ctx made one that cannot end: a SQLite
// statement waits for nothing but a lock, which busy_timeout already ends
// with SQLITE_BUSY. A context that can end costs each read a database/sql
// goroutine, a timer and a driver watch per step: 16% more server CPU in
// the bench, to end nothing sooner.
func statementContext(ctx context.Context, timeout time.Duration, waitsBounded bool) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= timeout {
		return ctx, noCancel
	}
	if waitsBounded {
		return context.WithoutCancel(ctx), noCancel
	}
	return context.WithTimeout(ctx, timeout)
}

func noCancel() {}

// prepared prepares on first use, not at start: a database down at start-up
// must not keep the server from starting.
func (q *Query) prepared(ctx context.Context) (*sql.Stmt, error) {
	if stmt := q.stmt.Load(); stmt != nil {
		return stmt, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if stmt := q.stmt.Load(); stmt != nil {
		return stmt, nil
	}
	if q.db == nil {
		return nil, errors.New("database: query on no database")
	}
	sqlDB, err := q.db.DB()
	if err != nil {
		return nil, err
	}
	stmt, err := sqlDB.PrepareContext(ctx, q.text)
	if err != nil {
		return nil, err
	}
	q.stmt.Store(stmt)
	return stmt, nil
}

// Close releases the prepared statement.
func (q *Query) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	stmt := q.stmt.Swap(nil)
	if stmt == nil {
		return nil
	}
	return stmt.Close()
}

// classify wraps an error that means "not now" in UnavailableError, as the
// dialector does for GORM's statements.
func classify(err error) error {
	if err != nil && IsUnavailable(err) {
		var u *UnavailableError
		if !errors.As(err, &u) {
			return &UnavailableError{Err: err}
		}
	}
	return err
}

// Time scans a nullable DATETIME column into t (nil for NULL), whether the
// driver hands it over as a time.Time or as the text SQLite stores.
func Time(t **time.Time) sql.Scanner { return timeScanner{dst: t} }

// NotNullTime is Time for a NOT NULL column.
func NotNullTime(t *time.Time) sql.Scanner { return notNullTime{dst: t} }

type timeScanner struct{ dst **time.Time }

func (s timeScanner) Scan(v any) error {
	if v == nil {
		*s.dst = nil
		return nil
	}
	t, err := parseTime(v)
	if err != nil {
		return err
	}
	*s.dst = &t
	return nil
}

type notNullTime struct{ dst *time.Time }

func (s notNullTime) Scan(v any) error {
	if v == nil {
		return errors.New("database: NULL in a NOT NULL time column")
	}
	t, err := parseTime(v)
	if err != nil {
		return err
	}
	*s.dst = t
	return nil
}

// sqliteTimeLayouts are the text forms SQLite's drivers write a time.Time
// in, the first the one licensor's rows hold.
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999 -0700 MST",
}

func parseTime(v any) (time.Time, error) {
	var s string
	switch x := v.(type) {
	case time.Time:
		return x.UTC(), nil
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		return time.Time{}, fmt.Errorf("database: cannot scan %T into a time", v)
	}
	for _, layout := range sqliteTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("database: %q is not a time", s)
}

// timeoutPlugin keeps DB_QUERY_TIMEOUT with the *gorm.DB it bounds, for the
// Queries made on it.
type timeoutPlugin time.Duration

const timeoutPluginName = "licensor:statement-timeout"

func (timeoutPlugin) Name() string              { return timeoutPluginName }
func (timeoutPlugin) Initialize(*gorm.DB) error { return nil }

func statementTimeoutOf(db *gorm.DB) time.Duration {
	if db != nil && db.Config != nil {
		if p, ok := db.Config.Plugins[timeoutPluginName].(timeoutPlugin); ok && p > 0 {
			return time.Duration(p)
		}
	}
	return queryTimeout(config.DB{})
}
