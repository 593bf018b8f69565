package database

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/wait"
)

// MySQL error numbers of a lost lock conflict.
const (
	mysqlLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlDeadlock        = 1213 // ER_LOCK_DEADLOCK
)

// conflictRetries bounds how many times RetryOnConflict runs a statement
// again after its first run.
const conflictRetries = 8

// IsConflict reports whether err is a transient lock conflict, after which
// the statement had no effect and may simply run again: MySQL's deadlock
// (1213), which InnoDB reports when, for example, an INSERT on a duplicate
// key meets a concurrent DELETE of it, and its lock wait timeout (1205).
func IsConflict(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && (me.Number == mysqlDeadlock || me.Number == mysqlLockWaitTimeout)
}

// RetryOnConflict runs stmt, one statement, and runs it again while it loses
// a lock conflict (IsConflict of its Error), up to a small bound, after a
// short random pause that grows with each try so that contenders fall out of
// step. It returns the result of the last run: a success, another error, or
// the conflict once the bound is reached. When ctx ends during a pause it
// stops and returns the last result at once.
//
// stmt must be safe to run again after a conflict, which is true of a single
// statement outside a transaction: the conflict rolled it back.
func RetryOnConflict(ctx context.Context, stmt func() *gorm.DB) *gorm.DB {
	res := stmt()
	for i := 1; i <= conflictRetries && IsConflict(res.Error); i++ {
		if wait.Sleep(ctx, jittered(i, time.Millisecond)) != nil {
			return res
		}
		res = stmt()
	}
	return res
}

// Transact runs fn in one transaction on db, and runs it again, whole, while
// it loses a lock conflict (a deadlock rolled all of it back), through retry:
// RetryOnConflict, or a service's own (one that runs it once, where nothing
// was configured). fn must be safe to run again: it writes what it was
// given, nothing it read before. opts, if any, begin the transaction (an
// isolation level of the caller's).
func Transact(ctx context.Context, db *gorm.DB, retry func(context.Context, func() *gorm.DB) *gorm.DB, fn func(tx *gorm.DB) error,
	opts ...*sql.TxOptions) error {
	return retry(ctx, func() *gorm.DB {
		return &gorm.DB{Error: db.WithContext(ctx).Transaction(fn, opts...)}
	}).Error
}

// jittered is the pause before retry number attempt: attempt units, times a
// random factor from 1 to 4.
func jittered(attempt int, unit time.Duration) time.Duration {
	return time.Duration(attempt) * unit * time.Duration(1+rand.IntN(4))
}
