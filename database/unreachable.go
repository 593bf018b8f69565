package database

import (
	"errors"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// MySQL errors IsUnavailable counts that leave the database serving other
// statements: a lost lock conflict on one row, and a read-only server, which
// still answers reads.
var mysqlReachable = map[uint16]bool{
	1205: true, // lock wait timeout
	1213: true, // deadlock
	1290: true, // running with --read-only
	1836: true, // read-only mode
}

// SQLite result codes IsUnavailable counts that leave reads working.
var sqliteReachable = map[int]bool{
	8:  true, // SQLITE_READONLY
	13: true, // SQLITE_FULL
}

// IsUnreachable reports whether err means that no statement gets through
// to the database now: it cannot be reached, did not answer in time, has no
// connection left or is shutting down. It is the part of IsUnavailable that
// concerns the whole database: IsUnavailable ("retry later") also counts the
// errors that concern one statement or one kind of statement (a lock
// conflict, a read-only or full database), after which a read may still
// succeed; IsUnreachable counts none of those. The rate limiter counts in
// the replica's memory on those, and fails the request on these.
func IsUnreachable(err error) bool {
	if !IsUnavailable(err) {
		return false
	}
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return !mysqlReachable[me.Number]
	}
	if code, ok := sqliteCode(err); ok {
		return !sqliteReachable[code]
	}
	return true
}
