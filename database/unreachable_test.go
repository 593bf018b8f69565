package database

import (
	"context"
	"errors"
	"fmt"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
)

func TestIsUnreachable(t *testing.T) {
	for err, want := range map[error]bool{
		&UnavailableError{Err: context.DeadlineExceeded}:              true,
		context.DeadlineExceeded:                                      true,
		&UnavailableError{Err: &mysqldriver.MySQLError{Number: 1040}}: true, // too many connections
		&UnavailableError{Err: &mysqldriver.MySQLError{Number: 1053}}: true, // shutting down
		&UnavailableError{Err: &mysqldriver.MySQLError{Number: 1213}}: false,
		fmt.Errorf("x: %w", &mysqldriver.MySQLError{Number: 1205}):    false,
		&UnavailableError{Err: &mysqldriver.MySQLError{Number: 1290}}: false, // read-only: reads still work
		&mysqldriver.MySQLError{Number: 1146}:                         false, // no such table: not unavailable at all
		&UnavailableError{Err: &mysqldriver.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}}: true,  // a Galera node cut off
		&mysqldriver.MySQLError{Number: 1047, Message: "Unknown command"}:                                                             false, // a bug
		errors.New("boom"): false,
		&UnavailableError{Err: errors.New("sql: database is closed")}: true,
	} {
		if got := IsUnreachable(err); got != want {
			t.Errorf("IsUnreachable(%v) = %v, want %v", err, got, want)
		}
	}
	if IsUnreachable(nil) {
		t.Error("IsUnreachable(nil) = true")
	}
}
