package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/licensor-api/licensor/config"
)

// countingDriver counts the statements its connections prepare.
type countingDriver struct {
	driver.Driver
	prepares *atomic.Int64
}

func (d countingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return countingConn{innerConn: c.(innerConn), prepares: d.prepares}, nil
}

type countingConn struct {
	innerConn
	prepares *atomic.Int64
}

func (c countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.prepares.Add(1)
	return c.innerConn.PrepareContext(ctx, q)
}

func (c countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.prepares.Add(1) // the driver prepares it, runs it and finalizes it
	return c.innerConn.ExecContext(ctx, q, args)
}

func (c countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.prepares.Add(1)
	return c.innerConn.QueryContext(ctx, q, args)
}

// countingDB opens a one-connection SQLite pool on a new file through the
// counting driver, with the statement cache (cached) or without.
func countingDB(t *testing.T, cached bool) (*sql.DB, *atomic.Int64) {
	t.Helper()
	if _, err := registerCachingDriver(); err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	base, err := sql.Open(sqliteCachingDriverName, "")
	if err != nil {
		t.Fatal(err)
	}
	inner := base.Driver().(cachingDriver).Driver
	_ = base.Close()
	var d driver.Driver = countingDriver{Driver: inner, prepares: n}
	if cached {
		d = cachingDriver{d}
	}
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db := sql.OpenDB(dsnConnector{d: d, dsn: SQLiteDSN(config.DB{Connection: SQLite, Database: path})})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	n.Store(0)
	return db, n
}

type dsnConnector struct {
	d   driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.d }

// transactions runs rounds transactions of three statements each, as GORM
// sends them (unprepared, each text the same every round).
func transactions(t *testing.T, db *sql.DB, rounds int) {
	t.Helper()
	for i := range rounds {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO t (id, n) VALUES (?, ?)", i, i); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRow("SELECT n FROM t WHERE id = ?", i).Scan(&n); err != nil || n != i {
			t.Fatalf("read back %d: %d, %v", i, n, err)
		}
		if _, err := tx.Exec("UPDATE t SET n = n + 1 WHERE id = ?", i); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// A statement is parsed once per connection, however many transactions
// send it: without the cache each of them parses it again.
func TestStatementsParsedOncePerConnection(t *testing.T) {
	db, n := countingDB(t, true)
	transactions(t, db, 50)
	if got := n.Load(); got != 3 {
		t.Errorf("50 transactions of 3 statements prepared %d statements, want 3", got)
	}
	bare, m := countingDB(t, false)
	transactions(t, bare, 50)
	if got := m.Load(); got < 150 {
		t.Errorf("without the cache: %d prepared, want one a statement (the comparison is void)", got)
	}
}

// The SQLite pools Open returns go through the cache.
func TestOpenUsesTheStatementCache(t *testing.T) {
	db, err := Open(context.Background(), config.DB{Connection: SQLite, Database: filepath.Join(t.TempDir(), "db.sqlite"), MaxOpenConns: 1, MaxIdleConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer Close(db)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sqlDB.Driver().(cachingDriver); !ok {
		t.Fatalf("the pool's driver is %T, want the caching driver", sqlDB.Driver())
	}
}

// Rows still open when their text is sent again (in a transaction, on the
// same connection) each read their own rows; a statement that failed is
// used again; a script of several statements runs whole; a prepared
// statement database/sql holds outlives its eviction from the cache.
func TestStatementCacheKeepsEachUseApart(t *testing.T) {
	db, _ := countingDB(t, true)
	transactions(t, db, 3) // ids 0, 1, 2 with n 1, 2, 3
	held, err := db.Prepare("SELECT n FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	outer, err := tx.Query("SELECT id FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for outer.Next() {
		var id int
		if err := outer.Scan(&id); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.Query("SELECT id FROM t ORDER BY id") // the same text, while outer is open
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for inner.Next() {
			k++
		}
		_ = inner.Close()
		seen = append(seen, fmt.Sprintf("%d:%d", id, k))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	_ = outer.Close()
	if fmt.Sprint(seen) != "[0:3 1:3 2:3]" {
		t.Errorf("nested reads of one text: %v, want [0:3 1:3 2:3]", seen)
	}
	if _, err := tx.Exec("INSERT INTO t (id, n) VALUES (?, ?)", 0, 9); err == nil {
		t.Fatal("a duplicate id was inserted")
	}
	if _, err := tx.Exec("INSERT INTO t (id, n) VALUES (?, ?)", 7, 7); err != nil {
		t.Fatalf("the statement after its failure: %v", err)
	}
	if _, err := tx.Exec("UPDATE t SET n = 70 WHERE id = 7; UPDATE t SET n = 71 WHERE id = 7"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	for i := range stmtCacheSize + 10 { // evicts every statement cached so far
		if _, err := db.Exec(fmt.Sprintf("SELECT %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[int]int{1: 2, 7: 71} {
		var got int
		if err := held.QueryRow(id).Scan(&got); err != nil || got != want {
			t.Errorf("held statement after eviction, id %d: %d, %v; want %d", id, got, err, want)
		}
	}
}

// A query whose rows failed midway (the driver cannot reset its statement)
// is not kept: its text is prepared again next time. A text longer than
// stmtCacheMaxText is prepared for each use alone.
func TestStatementCacheDropsWhatItCannotReuse(t *testing.T) {
	db, n := countingDB(t, true)
	if _, err := db.Exec("INSERT INTO t (id, n) VALUES (1, 1), (2, -9223372036854775808)"); err != nil {
		t.Fatal(err)
	}
	overflow := "SELECT abs(n), ? FROM t ORDER BY id"
	for round := range 2 {
		before := n.Load()
		rows, err := db.Query(overflow, "a text argument")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		if rows.Err() == nil {
			t.Fatal("abs of the smallest integer did not fail")
		}
		_ = rows.Close()
		if got := n.Load() - before; got != 1 {
			t.Errorf("round %d: the failed query's text was prepared %d times, want once (again each round)", round, got)
		}
	}

	long := "SELECT n FROM t WHERE id = ?" + strings.Repeat(" ", stmtCacheMaxText)
	before := n.Load()
	for range 3 {
		var got int
		if err := db.QueryRow(long, 1).Scan(&got); err != nil || got != 1 {
			t.Fatalf("the long text: %d, %v", got, err)
		}
	}
	if got := n.Load() - before; got != 3 {
		t.Errorf("a text past stmtCacheMaxText was prepared %d times in 3 uses, want 3 (never cached)", got)
	}
}

// Closing a connection twice closes it once, as the driver's own does.
func TestCachingConnClosesTwice(t *testing.T) {
	if _, err := registerCachingDriver(); err != nil {
		t.Fatal(err)
	}
	base, err := sql.Open(sqliteCachingDriverName, "")
	if err != nil {
		t.Fatal(err)
	}
	d := base.Driver()
	_ = base.Close()
	c, err := d.Open(filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.(driver.ExecerContext).ExecContext(context.Background(), "SELECT 1", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
