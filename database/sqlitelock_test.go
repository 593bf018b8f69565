package database_test

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// The busy timeout is DB_QUERY_TIMEOUT, at most 10 s: a lock wait never
// outlasts the statement deadline the rest of the application relies on.
// The driver runs the pragmas in order, so busy_timeout comes first, before
// those that take locks (journal_mode(WAL)), or they do not wait as long.
func TestSQLiteBusyTimeoutFollowsTheQueryTimeout(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    string
	}{
		{300 * time.Millisecond, "busy_timeout(300)"},
		{2 * time.Second, "busy_timeout(2000)"},
		{0, "busy_timeout(5000)"}, // a hand-made config: DB_QUERY_TIMEOUT's default
		{30 * time.Second, "busy_timeout(10000)"},
	} {
		for _, dsn := range []string{
			database.SQLiteDSN(config.DB{Database: "x.sqlite", QueryTimeout: c.timeout}),
			database.SQLiteReadDSN(config.DB{Database: "x.sqlite", QueryTimeout: c.timeout}),
		} {
			_, query, _ := strings.Cut(dsn, "?")
			q, err := url.ParseQuery(query)
			if err != nil {
				t.Fatal(err)
			}
			if p := q["_pragma"]; len(p) == 0 || p[0] != c.want || !slices.Contains(p, "journal_mode(WAL)") {
				t.Errorf("DB_QUERY_TIMEOUT=%s: pragmas %q, want %s first, then journal_mode(WAL)", c.timeout, p, c.want)
			}
		}
	}
}

// lockedSQLite opens a SQLite database (not migrated) at a temporary path,
// with DB_QUERY_TIMEOUT timeout and one table, t, whose write lock another
// connection holds until the test ends (holdWriteLock).
func lockedSQLite(t *testing.T, timeout time.Duration) *gorm.DB {
	t.Helper()
	cfg := config.DB{Connection: database.SQLite, Database: filepath.Join(t.TempDir(), "lock.sqlite"),
		MaxOpenConns: 1, MaxIdleConns: 1, QueryTimeout: timeout}
	db, err := database.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(db) })
	if err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY)").Error; err != nil {
		t.Fatal(err)
	}
	holdWriteLock(t, cfg.Database)
	return db
}

// holdWriteLock takes the write lock of the SQLite database at path from a
// connection of its own (BEGIN IMMEDIATE), held until the test ends.
func holdWriteLock(t *testing.T, path string) {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.ExecContext(context.Background(), "ROLLBACK") })
}
