package database_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A Query's statement on SQLite (its preparation included), and a GORM
// statement there, runs on a context that cannot end (the connection's busy_timeout bounds its waits
// instead, see the next test): a request already gone still reads its row,
// and writes one, where on MySQL the context's end stops the statement, as
// a frozen server needs.
func TestQueryContextEndsOnlyOnMySQL(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		read := database.NewQuery(db.Read, "SELECT COUNT(*) FROM consumers WHERE id <> ?")
		write := database.NewQuery(db.Gorm, "DELETE FROM consumers WHERE id = ?")
		t.Cleanup(func() { _ = read.Close(); _ = write.Close() })
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		var n int64
		rowErr := read.Row(gone, []any{&n}, "none")
		_, execErr := write.Exec(gone, "none")
		// GORM's statements alike (boundStatements), outside a transaction.
		gormErr := db.Read.WithContext(gone).Table("consumers").Count(&n).Error
		gormWriteErr := db.Gorm.WithContext(gone).Exec("DELETE FROM consumers WHERE id = ?", "none").Error
		if db.Dialect == database.SQLite {
			if rowErr != nil || execErr != nil || gormErr != nil || gormWriteErr != nil {
				t.Errorf("SQLite, a context already ended: Row %v, Exec %v, GORM read %v, GORM write %v; want all run",
					rowErr, execErr, gormErr, gormWriteErr)
			}
			return
		}
		for what, err := range map[string]error{"Row": rowErr, "Exec": execErr, "GORM read": gormErr, "GORM write": gormWriteErr} {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("MySQL, a context already ended: %s %v; want it stopped (context.Canceled)", what, err)
			}
		}
	})
}

// With no context to end it, a statement on SQLite that meets another
// connection's write lock still ends within about DB_QUERY_TIMEOUT (the
// busy timeout), with an unavailable error, not after the whole 10 s busy
// timeout: the bound a context would have given, kept by the connection.
// So it is for a Query's write, and for a transaction begun on a context
// without a deadline (as a request's, or the group commit's writer, are).
func TestSQLiteLockWaitEndsWithinTheQueryTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	db := lockedSQLite(t, timeout)
	insert := database.NewQuery(db, "INSERT INTO t (id) VALUES (?)")
	t.Cleanup(func() { _ = insert.Close() })
	for what, run := range map[string]func() error{
		"a Query's write": func() error { _, err := insert.Exec(context.Background(), 1); return err },
		"a transaction": func() error {
			return db.WithContext(context.Background()).Transaction(func(tx *gorm.DB) error {
				return tx.Exec("INSERT INTO t (id) VALUES (1)").Error
			})
		},
	} {
		began := time.Now()
		err := run()
		took := time.Since(began)
		t.Logf("%s: %v after %s", what, err, took.Round(time.Millisecond))
		if !database.IsUnavailable(err) {
			t.Errorf("%s behind another connection's lock: %v, want an unavailable error", what, err)
		}
		if took < timeout/2 || took > 3*time.Second {
			t.Errorf("%s waited %s for the lock with DB_QUERY_TIMEOUT=%s", what, took.Round(time.Millisecond), timeout)
		}
	}
}

// A caller's deadline sooner than DB_QUERY_TIMEOUT still ends a SQLite
// statement's wait for a lock, for a Query and a GORM statement alike (as
// /readyz bounds its probe to two seconds): only a context that would not
// end sooner is let go.
func TestSQLiteStatementKeepsASoonerDeadline(t *testing.T) {
	const timeout = 3 * time.Second
	db := lockedSQLite(t, timeout)
	insert := database.NewQuery(db, "INSERT INTO t (id) VALUES (?)")
	t.Cleanup(func() { _ = insert.Close() })
	for what, run := range map[string]func(ctx context.Context) error{
		"Query": func(ctx context.Context) error { _, err := insert.Exec(ctx, 1); return err },
		"GORM": func(ctx context.Context) error {
			return db.WithContext(ctx).Exec("INSERT INTO t (id) VALUES (2)").Error
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		began := time.Now()
		err := run(ctx)
		took := time.Since(began)
		cancel()
		if err == nil || took > timeout/2 {
			t.Errorf("%s behind another connection's lock with a 200 ms deadline: %v after %s, want an error well before the %s busy timeout",
				what, err, took.Round(time.Millisecond), timeout)
		}
	}
}
