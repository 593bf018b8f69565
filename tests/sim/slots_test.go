package sim

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/licensor-api/licensor/database"
)

// Warm slots: what a case costs, without what only the simulation pays.
//
// A case's processes open their SQLite connections anew, and with the
// pure-Go driver a new connection parses the whole schema on its first
// statement and every statement again on its first use: in a case, whose
// processes live for a few dozen requests, that was a quarter of the CPU
// (a production process pays it once). So a case runs in a slot, a
// database file that outlives the case: a process's pools still open and
// close as they do (`licensor serve` starting, a crash closing them), but a
// connection their driver closes goes back to the slot's reservoir with
// any transaction rolled back, as SQLite rolls back a closed connection's,
// and the next pool on the same file takes it back with its schema and
// statements parsed. Between cases the slot's rows are put back to the
// template's (deleted and inserted again, the schema untouched, so that
// nothing parsed goes stale). A case sees a database equal to a copy of
// the template, row for row, and TestWarmSlotIsAFreshCopy holds it to
// that: the same seed's history on a fresh slot and on one warmed by other
// cases, byte for byte.

// simDriverName is the driver the processes' SQLite pools open through
// (config.DB.SQLiteDriver).
const simDriverName = "licensor-sim-sqlite"

var registerSimDriver = sync.OnceValue(func() error {
	inner, err := database.SQLiteDriver()
	if err != nil {
		return err
	}
	sql.Register(simDriverName, &keepingDriver{inner: inner, idle: map[string][]*keptConn{}})
	return nil
})

// theDriver is the registered keepingDriver.
func theDriver() (*keepingDriver, error) {
	if err := registerSimDriver(); err != nil {
		return nil, err
	}
	db, err := sql.Open(simDriverName, "")
	if err != nil {
		return nil, err
	}
	d := db.Driver().(*keepingDriver)
	return d, db.Close()
}

// keepingDriver opens licensor's SQLite connections and keeps those closed,
// by DSN, for the next pool that opens one with the same DSN.
type keepingDriver struct {
	inner driver.Driver
	mu    sync.Mutex
	idle  map[string][]*keptConn
}

// Open hands out a kept connection of the DSN, or opens one.
func (d *keepingDriver) Open(dsn string) (driver.Conn, error) {
	d.mu.Lock()
	if cs := d.idle[dsn]; len(cs) > 0 {
		c := cs[len(cs)-1]
		d.idle[dsn] = cs[:len(cs)-1]
		d.mu.Unlock()
		c.closed = false
		return c, nil
	}
	d.mu.Unlock()
	c, err := d.inner.Open(dsn)
	if err != nil {
		return nil, err
	}
	fc, ok := c.(fullConn)
	if !ok {
		return nil, errors.Join(fmt.Errorf("sim: the SQLite connection is a %T, without a method the slots need", c), c.Close())
	}
	return &keptConn{fullConn: fc, d: d, dsn: dsn}, nil
}

// forget closes every kept connection whose DSN names the file path.
func (d *keepingDriver) forget(path string) {
	d.mu.Lock()
	var drop []*keptConn
	for dsn, cs := range d.idle {
		if dsnPath(dsn) == path {
			drop = append(drop, cs...)
			delete(d.idle, dsn)
		}
	}
	d.mu.Unlock()
	for _, c := range drop {
		_ = c.fullConn.Close()
	}
}

// kept is how many connections to the file path are kept.
func (d *keepingDriver) kept(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for dsn, cs := range d.idle {
		if dsnPath(dsn) == path {
			n += len(cs)
		}
	}
	return n
}

// dsnPath is the file a DSN ("file:PATH?…") names.
func dsnPath(dsn string) string {
	p, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	return p
}

// fullConn is what licensor's SQLite connection offers (its statement
// cache's), all of which database/sql looks for.
type fullConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// keptConn is a connection whose Close keeps it for the next pool.
type keptConn struct {
	fullConn
	d      *keepingDriver
	dsn    string
	closed bool
}

// Close rolls back what the connection left open, as closing it would, and
// keeps it; a connection that cannot roll back is closed for real.
func (c *keptConn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	if _, err := c.fullConn.ExecContext(context.Background(), "ROLLBACK", nil); err != nil &&
		!strings.Contains(err.Error(), "no transaction is active") {
		return c.fullConn.Close()
	}
	c.d.mu.Lock()
	c.d.idle[c.dsn] = append(c.d.idle[c.dsn], c)
	c.d.mu.Unlock()
	return nil
}

// slot is a database file cases run in one at a time.
type slot struct {
	path  string
	reset *sql.DB // one connection, that puts the template's rows back
}

var (
	slotsMu   sync.Mutex
	freeSlots []*slot
	slotNo    int
	// templateRows are the statements that fill an empty schema with the
	// template's rows (resetStatements).
	templateRows     []string
	templateRowsOnce sync.Once
	templateRowsErr  error
)

// acquireSlot takes a free slot, or makes one from the template.
func acquireSlot(t testing.TB) *slot {
	slotsMu.Lock()
	if n := len(freeSlots); n > 0 {
		s := freeSlots[n-1]
		freeSlots = freeSlots[:n-1]
		slotsMu.Unlock()
		return s
	}
	slotsMu.Unlock()
	s, err := newSlot(t)
	if err != nil {
		t.Fatalf("a slot for the case: %v", err)
	}
	return s
}

// newSlot copies the template to a file of its own.
func newSlot(t testing.TB) (*slot, error) {
	tp := theTemplate(t)
	slotsMu.Lock()
	slotNo++
	n := slotNo
	slotsMu.Unlock()
	if _, err := theDriver(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(tp.path)
	if err != nil {
		return nil, fmt.Errorf("read the template: %w", err)
	}
	path := filepath.Join(tmplDir, fmt.Sprintf("slot-%d.sqlite", n))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("copy the template: %w", err)
	}
	// Foreign keys off: the tables are emptied and filled in any order, and
	// a PRAGMA that turned them off per transaction would expire every
	// statement the connection keeps.
	reset, err := sql.Open(simDriverName, "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	reset.SetMaxOpenConns(1)
	return &slot{path: path, reset: reset}, nil
}

// release puts the template's rows back and frees the slot; a slot that
// cannot be reset is dropped.
func (s *slot) release() error {
	if err := s.restore(); err != nil {
		s.drop()
		return err
	}
	slotsMu.Lock()
	freeSlots = append(freeSlots, s)
	slotsMu.Unlock()
	return nil
}

// restore empties every table and fills it with the template's rows, in
// one transaction.
func (s *slot) restore() error {
	stmts, err := resetStatements()
	if err != nil {
		return err
	}
	ctx := context.Background()
	conn, err := s.reset.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
			return fmt.Errorf("reset: %s: %w", q, err)
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("reset: commit: %w", err)
	}
	return nil
}

// drop closes the slot's connections and removes its files.
func (s *slot) drop() {
	_ = s.reset.Close()
	if d, err := theDriver(); err == nil {
		d.forget(s.path)
	}
	removeDB(s.path)
}

// resetStatements are, once per test binary, the statements that put the
// template's rows back into a slot: every table emptied, then the
// template's rows inserted as SQLite's own quote() renders them (the same
// types, the same text), the row order and the AUTOINCREMENT counters
// (sqlite_sequence) kept.
func resetStatements() ([]string, error) {
	templateRowsOnce.Do(func() {
		templateRows, templateRowsErr = rowStatements(tmpl.path)
	})
	return templateRows, templateRowsErr
}

// rowStatements are the statements that empty the tables of the database
// at path and fill them with its rows as they are now.
func rowStatements(path string) ([]string, error) {
	inner, err := database.SQLiteDriver()
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector{inner, "file:" + path + "?_pragma=query_only(1)"})
	defer db.Close()
	var tables []string
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_stat%' ORDER BY name")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		tables = append(tables, name)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	var out []string
	for _, tb := range tables {
		out = append(out, fmt.Sprintf(`DELETE FROM %q`, tb))
	}
	// sqlite_sequence last, emptied again: the inserts of the tables with
	// AUTOINCREMENT have written their counters into it meanwhile.
	if i := slices.Index(tables, "sqlite_sequence"); i >= 0 {
		tables = append(slices.Delete(tables, i, i+1), "sqlite_sequence")
	}
	for _, tb := range tables {
		if tb == "sqlite_sequence" {
			out = append(out, "DELETE FROM sqlite_sequence")
		}
		var cols []string
		rows, err := db.Query(fmt.Sprintf(`SELECT name FROM pragma_table_info(%s)`, quoteText(tb)))
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				return nil, errors.Join(err, rows.Close())
			}
			cols = append(cols, fmt.Sprintf(`quote(%q)`, c))
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		q := fmt.Sprintf(`SELECT 'INSERT INTO %q VALUES (' || %s || ')' FROM %q`, tb, strings.Join(cols, ` || ', ' || `), tb)
		rows, err = db.Query(q)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		for rows.Next() {
			var ins string
			if err := rows.Scan(&ins); err != nil {
				return nil, errors.Join(err, rows.Close())
			}
			out = append(out, ins)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// connector opens connections of a driver with a DSN.
type connector struct {
	d   driver.Driver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.d }

// quoteText is s as an SQL string literal.
func quoteText(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestWarmSlotIsAFreshCopy: a slot put back holds the template's rows, row
// for row (AUTOINCREMENT counters too), and a seed run in a slot warmed by
// other cases (its connections kept, its rows deleted and inserted again)
// has the history it has in a fresh copy of the template, byte for byte.
func TestWarmSlotIsAFreshCopy(t *testing.T) {
	want, err := rowStatements(theTemplate(t).path)
	if err != nil {
		t.Fatal(err)
	}
	// A seed whose plan crashes a process while a write is armed: its
	// connections are handed back in the middle of the case.
	var p plan
	for seed := uint64(1); ; seed++ {
		p = genPlan(newPCG(seed))
		if slices.ContainsFunc(p.Ops, func(o op) bool { return o.Kind == opCrash }) &&
			slices.ContainsFunc(p.Ops, func(o op) bool { return o.Kind == opArm }) {
			break
		}
	}
	s, err := newSlot(t)
	if err != nil {
		t.Fatal(err)
	}
	defer s.drop()
	fresh := runPlanIn(t, s, p)
	if len(fresh.Violations) > 0 {
		t.Fatalf("the plan broke an invariant: %v", fresh.Violations)
	}
	for seed := uint64(1000); seed < 1005; seed++ {
		if err := s.restore(); err != nil {
			t.Fatal(err)
		}
		got, err := rowStatements(s.path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after a restore the slot's rows are not the template's:\n%s", firstDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
		}
		runPlanIn(t, s, genPlan(newPCG(seed)))
	}
	if err := s.restore(); err != nil {
		t.Fatal(err)
	}
	d, err := theDriver()
	if err != nil {
		t.Fatal(err)
	}
	if kept := d.kept(s.path); kept == 0 {
		t.Fatal("no connection of the slot was kept: the slot is not warm")
	}
	warm := runPlanIn(t, s, p)
	if warm.History != fresh.History || strings.Join(warm.Violations, "\n") != strings.Join(fresh.Violations, "\n") {
		t.Fatalf("the seed's history in a warm slot differs from its history in a fresh one:\n%s",
			firstDiff(fresh.History, warm.History))
	}
}

// TestKeptConnectionRollsBack: a connection closed in a transaction (a
// crashed process's) goes back without what the transaction wrote, as
// SQLite rolls back a closed connection's transaction, and begins anew.
func TestKeptConnectionRollsBack(t *testing.T) {
	s, err := newSlot(t)
	if err != nil {
		t.Fatal(err)
	}
	defer s.drop()
	d, err := theDriver()
	if err != nil {
		t.Fatal(err)
	}
	dsn := "file:" + s.path + "?_pragma=foreign_keys(1)"
	ctx := context.Background()
	c, err := d.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	fc := c.(*keptConn)
	if _, err := fc.BeginTx(ctx, driver.TxOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.ExecContext(ctx, "DELETE FROM consumers", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := d.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if again != c {
		t.Fatal("the closed connection was not kept")
	}
	defer again.Close()
	tx, err := again.(*keptConn).BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		t.Fatalf("a kept connection cannot begin: %v", err)
	}
	defer tx.Rollback()
	rows, err := again.(*keptConn).QueryContext(ctx, "SELECT COUNT(*) FROM consumers", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		t.Fatal(err)
	}
	if n, _ := v[0].(int64); n == 0 {
		t.Fatal("the closed connection's transaction was kept: its DELETE landed")
	}
}
