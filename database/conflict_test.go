package database

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/licensor-api/licensor/config"
	"gorm.io/gorm"
)

// failing is a statement that fails with err on its first n runs, then
// succeeds; calls counts its runs.
type failing struct {
	n     int
	err   error
	calls int
}

func (f *failing) stmt() *gorm.DB {
	f.calls++
	if f.calls <= f.n {
		return &gorm.DB{Error: f.err}
	}
	return &gorm.DB{RowsAffected: 1}
}

// TestRetryOnConflict: a lost lock conflict (a deadlock, a lock wait
// timeout), bare or wrapped, runs the statement again until it succeeds or
// the bound is reached; any other error is returned after one run.
func TestRetryOnConflict(t *testing.T) {
	deadlock := &mysqldriver.MySQLError{Number: 1213, Message: "lost a lock"}
	lockWait := &mysqldriver.MySQLError{Number: 1205, Message: "lost a lock"}
	duplicate := &mysqldriver.MySQLError{Number: 1062, Message: "Duplicate entry"}
	refused := errors.New("connection refused")
	for _, tt := range []struct {
		name     string
		err      error
		fails    int // the runs that fail with err before one succeeds
		wantRuns int
		wantErr  error // nil: the success
	}{
		{"1213", deadlock, 3, 4, nil},
		{"1205", lockWait, 3, 4, nil},
		{"wrapped 1213", fmt.Errorf("update: %w", deadlock), 1, 2, nil},
		{"gorm duplicate key", gorm.ErrDuplicatedKey, 1, 1, gorm.ErrDuplicatedKey},
		{"1062", duplicate, 1, 1, duplicate},
		{"connection refused", refused, 1, 1, refused},
		{"past the bound", deadlock, 1 << 30, 1 + conflictRetries, deadlock},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &failing{n: tt.fails, err: tt.err}
			res := RetryOnConflict(context.Background(), f.stmt)
			if res.Error != tt.wantErr || f.calls != tt.wantRuns || tt.wantErr == nil && res.RowsAffected != 1 {
				t.Errorf("result = %v (rows %d) after %d runs, want %v after %d", res.Error, res.RowsAffected, f.calls, tt.wantErr, tt.wantRuns)
			}
		})
	}
}

func TestRetryOnConflictStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	conflict := &mysqldriver.MySQLError{Number: 1213}
	calls := 0
	res := RetryOnConflict(ctx, func() *gorm.DB {
		calls++
		if calls == 2 {
			cancel() // the caller gives up while the statement runs
		}
		return &gorm.DB{Error: conflict}
	})
	if res.Error != conflict || calls != 2 {
		t.Errorf("result = %v after %d runs, want the conflict after 2", res.Error, calls)
	}

	f := &failing{n: 1 << 30, err: conflict}
	if res := RetryOnConflict(ctx, f.stmt); res.Error != conflict || f.calls != 1 {
		t.Errorf("cancelled ctx: result = %v after %d runs, want the conflict after 1", res.Error, f.calls)
	}
}

// A deadline that passes during a pause ends the pause and the retries.
func TestRetryOnConflictPauseEndsWithTheContext(t *testing.T) {
	// The bound's pauses add up to at least 36ms: a 1ms deadline passes
	// during one of them.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	conflict := &mysqldriver.MySQLError{Number: 1205}
	f := &failing{n: 1 << 30, err: conflict}
	res := RetryOnConflict(ctx, f.stmt)
	if res.Error != conflict || f.calls >= 1+conflictRetries {
		t.Errorf("result = %v after %d runs, want the conflict before the bound (%d runs)", res.Error, f.calls, 1+conflictRetries)
	}
}

func TestIsConflict(t *testing.T) {
	for err, want := range map[error]bool{
		&mysqldriver.MySQLError{Number: 1213}:                      true,
		&mysqldriver.MySQLError{Number: 1205}:                      true,
		fmt.Errorf("x: %w", &mysqldriver.MySQLError{Number: 1205}): true,
		&mysqldriver.MySQLError{Number: 1062}:                      false,
		gorm.ErrRecordNotFound:                                     false,
		context.Canceled:                                           false,
	} {
		if got := IsConflict(err); got != want {
			t.Errorf("IsConflict(%v) = %v, want %v", err, got, want)
		}
	}
	if IsConflict(nil) {
		t.Error("IsConflict(nil) = true")
	}
}

// A compare-and-set that writes the values a row already holds must still
// count as a match: MySQL reports matched rows only with clientFoundRows.
func TestMySQLDSNCountsMatchedRows(t *testing.T) {
	dsn, err := MySQLDSN(config.DB{Connection: MySQL, Host: "127.0.0.1", Port: 3306, Username: "u", Database: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dsn, "clientFoundRows=true") {
		t.Errorf("DSN %q lacks clientFoundRows=true", dsn)
	}
}
