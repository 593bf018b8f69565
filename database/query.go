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

// Query is one hot statement, the kind every request makes (the token row,
// an idempotency record, the rate limit's count): plain SQL, prepared once
// on each connection of the pool and kept (database/sql re-prepares it on a
// new connection), scanned into the caller's variables without reflection.
// GORM builds, parses and reflects on every call; for these few statements
// that is most of the cost. Like a GORM statement, a Query runs within
// DB_QUERY_TIMEOUT and its errors are classified (UnavailableError for "not
// now"): on MySQL through its context's deadline, on SQLite through the
// connection's busy_timeout (see bounded).
type Query struct {
	db      *gorm.DB
	text    string
	timeout time.Duration
	// waitsBounded: the connection itself bounds every wait a statement
	// makes (SQLite), so the statement needs no context that can end.
	waitsBounded bool

	mu   sync.Mutex               // serialises the first preparation
	stmt atomic.Pointer[sql.Stmt] // nil until the first call prepares it
}

// NewQuery returns the read text on db's pool. The text uses ? for its
// arguments, which both dialects take. Nothing is prepared until it runs.
func NewQuery(db *gorm.DB, text string) *Query {
	sqlite := db != nil && db.Dialector != nil && db.Dialector.Name() == SQLite
	return &Query{db: db, text: text, timeout: statementTimeoutOf(db), waitsBounded: sqlite}
}

// Row runs the query and scans its first row into dest. It returns ErrNoRows
// when there is none.
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

// bounded is the context the statement runs on (statementContext).
func (q *Query) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return statementContext(ctx, q.timeout, q.waitsBounded)
}

// statementContext is the context a statement runs on, for a Query and for
// GORM's statements (boundStatements) alike: ctx itself when its deadline
// comes before timeout (a caller that bounds its statements tighter, such
// as /readyz, keeps its bound); else, unless waitsBounded, ctx with timeout:
// on MySQL the driver gives up on a frozen server when it ends.
//
// With waitsBounded (SQLite) it is ctx made one that cannot end. A SQLite
// statement waits for nothing but a lock, and the connection's busy_timeout
// (DB_QUERY_TIMEOUT, at most 10 s) ends that wait with SQLITE_BUSY, an
// unavailable error, whatever the context. A context that can end costs
// each read a goroutine of database/sql's (it closes the rows when the
// context ends) and a timer, and the driver a watch of it around every
// step: in the bench a replay's server CPU was 1/0.86 of what it is
// without, to end nothing sooner (the driver watches the context only
// while it waits for a lock).
func statementContext(ctx context.Context, timeout time.Duration, waitsBounded bool) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= timeout {
		return ctx, noCancel
	}
	if waitsBounded {
		return context.WithoutCancel(ctx), noCancel
	}
	return context.WithTimeout(ctx, timeout)
}

// noCancel is the CancelFunc of a context bounded made no new one for.
func noCancel() {}

// prepared returns the statement, preparing it on first use (not at start:
// a database that is down at start-up must not keep the server from
// starting; the first request then gets the 503 it would get anyway).
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

// Time scans a DATETIME column into t whatever form the driver hands it
// in: a time.Time (MySQL with parseTime, SQLite's drivers for a DATETIME
// column) or the text SQLite stores. A NULL leaves t nil when nullable, and
// is an error otherwise.
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

// statementTimeoutOf is the statement timeout Open gave db, or the default
// for a *gorm.DB made some other way.
func statementTimeoutOf(db *gorm.DB) time.Duration {
	if db == nil || db.Config == nil {
		return queryTimeout(config.DB{})
	}
	if p, ok := db.Config.Plugins[timeoutPluginName].(timeoutPlugin); ok && p > 0 {
		return time.Duration(p)
	}
	return queryTimeout(config.DB{})
}
