package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/fault"
)

// UnavailableError is a database error that means "not now": the database
// cannot be reached, did not answer in time, is out of space, or is locked
// past its busy timeout. The statement may be retried later; a request
// answers 503 with Retry-After, never 500.
type UnavailableError struct {
	Err error
}

// ErrUnavailable is what every *UnavailableError unwraps to first: its
// code, which app/http, knowing no database package, answers 503.
var ErrUnavailable error = fault.New("database_unavailable", "database unavailable")

// UnavailableError implements app/idempotency's unavailable interface.
var _ interface{ Unavailable() bool } = (*UnavailableError)(nil)

func (e *UnavailableError) Error() string { return "database unavailable: " + e.Err.Error() }

// Unwrap is ErrUnavailable, then the driver's error.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Unavailable tells app/idempotency, which knows no database package, that
// the error is "retry later".
func (e *UnavailableError) Unavailable() bool { return true }

// MySQL server errors that mean "not now".
var mysqlUnavailable = map[uint16]bool{
	1021: true, // disk full
	1040: true, // too many connections
	1041: true, // out of memory
	1114: true, // the table is full
	1203: true, // max_user_connections
	1053: true, // server shutdown in progress
	1205: true, // lock wait timeout (past RetryOnConflict's retries)
	1213: true, // deadlock (past RetryOnConflict's retries)
	1290: true, // running with --read-only
	1836: true, // read-only mode
	3024: true, // query execution interrupted, maximum statement time exceeded
}

// isGaleraNotReady reports a Galera node that is not in the cluster's
// primary component (cut off, or still joining): it answers every statement
// with 1047 "WSREP has not yet prepared node for application use". Not now;
// another node, or this one once it rejoins, serves the retry. (1047 is
// also MySQL's "unknown command", a bug, so the message decides.)
func isGaleraNotReady(me *mysqldriver.MySQLError) bool {
	return me.Number == 1047 && strings.Contains(me.Message, "WSREP")
}

// SQLite primary result codes that mean "not now".
var sqliteUnavailable = map[int]bool{
	5:  true, // SQLITE_BUSY
	6:  true, // SQLITE_LOCKED
	8:  true, // SQLITE_READONLY
	10: true, // SQLITE_IOERR
	13: true, // SQLITE_FULL
	14: true, // SQLITE_CANTOPEN
}

// sqliteCode is the primary result code of the SQLite driver's error in
// err's chain (the low byte of its extended code); ok false for none.
func sqliteCode(err error) (code int, ok bool) {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code() & 0xff, true
	}
	return 0, false
}

// IsUnavailable reports whether err means the database is unavailable for
// now (see UnavailableError), as opposed to a bug or a refused statement.
// IsUnreachable is the part of it that concerns the whole database, not
// one statement.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var u *UnavailableError
	var me *mysqldriver.MySQLError
	var ne net.Error
	switch {
	case errors.As(err, &u):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, mysqldriver.ErrInvalidConn):
		return true
	case errors.As(err, &me):
		return mysqlUnavailable[me.Number] || isGaleraNotReady(me)
	case errors.As(err, &ne):
		return true
	}
	if code, ok := sqliteCode(err); ok {
		return sqliteUnavailable[code]
	}
	// database/sql's own "closed" error is not exported.
	return strings.Contains(err.Error(), "sql: database is closed")
}

// classifying wraps a dialector so that every error GORM reports passes
// through Translate: the dialect's own translation (duplicate keys), then
// UnavailableError for what means "not now".
type classifying struct {
	gorm.Dialector
	// rate is the pool's prepared rate_limits upsert (HitRateWindow).
	rate *rateQuery
}

var _ gorm.ErrorTranslator = classifying{}

// Translate implements gorm.ErrorTranslator.
func (d classifying) Translate(err error) error {
	var u *UnavailableError
	if errors.As(err, &u) { // already translated: GORM adds some errors twice
		return err
	}
	if t, ok := d.Dialector.(gorm.ErrorTranslator); ok {
		err = t.Translate(err)
	}
	if IsUnavailable(err) {
		return &UnavailableError{Err: err}
	}
	return err
}

// deadlineKey is where a statement's deadline keeps its cancel function.
const deadlineKey = "licensor:deadline"

// boundStatements runs every statement GORM runs on statementContext, as a
// Query runs: a deadline of its own, timeout, unless its context already
// ends sooner, so that a frozen database makes a request fail fast (503)
// instead of hanging; on SQLite (waitsBounded), whose busy_timeout ends the
// one wait a statement makes, a context that cannot end instead.
func boundStatements(db *gorm.DB, timeout time.Duration, waitsBounded bool) error {
	type bound struct {
		parent context.Context
		cancel context.CancelFunc
	}
	begin := func(tx *gorm.DB) {
		ctx := tx.Statement.Context
		if ctx == nil {
			ctx = context.Background()
		}
		bounded, cancel := statementContext(ctx, timeout, waitsBounded)
		tx.Statement.Context = bounded
		tx.InstanceSet(deadlineKey, bound{parent: ctx, cancel: cancel})
	}
	// end puts the caller's context back: a query builder reused for a
	// second statement (a Count, then a Find) must not inherit a spent one.
	end := func(tx *gorm.DB) {
		if v, ok := tx.InstanceGet(deadlineKey); ok {
			b := v.(bound)
			b.cancel()
			tx.Statement.Context = b.parent
		}
	}
	cb := db.Callback()
	steps := []struct {
		before, after interface {
			Register(string, func(*gorm.DB)) error
		}
	}{
		{cb.Create().Before("gorm:create"), cb.Create().After("gorm:create")},
		{cb.Query().Before("gorm:query"), cb.Query().After("gorm:query")},
		{cb.Update().Before("gorm:update"), cb.Update().After("gorm:update")},
		{cb.Delete().Before("gorm:delete"), cb.Delete().After("gorm:delete")},
		{cb.Raw().Before("gorm:raw"), cb.Raw().After("gorm:raw")},
	}
	for _, s := range steps {
		if err := s.before.Register(deadlineKey+":begin", begin); err != nil {
			return err
		}
		if err := s.after.Register(deadlineKey+":end", end); err != nil {
			return err
		}
	}
	return nil
}
