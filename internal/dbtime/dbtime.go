// Package dbtime is the precision of the times the tables keep. MySQL's
// DATETIME(6) rounds what is finer than microseconds, SQLite keeps
// nanoseconds: a time cut to the microsecond, in UTC, reads back equal to
// the one its writer kept on either database.
package dbtime

import "time"

// Stamp is t as a DATETIME(6) column keeps it: UTC, to the microsecond.
func Stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Now is the time now, as Stamp keeps it.
func Now() time.Time { return Stamp(time.Now()) }
