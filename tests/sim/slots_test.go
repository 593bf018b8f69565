package sim

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// theDriver registers the keepingDriver once, and returns it.
var theDriver = sync.OnceValues(func() (*keepingDriver, error) {
	inner, err := database.SQLiteDriver()
	if err != nil {
		return nil, err
	}
	d := &keepingDriver{inner: inner, idle: map[string][]*keptConn{}}
	sql.Register(simDriverName, d)
	return d, nil
})

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
	path   string
	driver string  // the driver its processes open through: simDriverName, or "" (cold)
	reset  *sql.DB // one connection, that puts the template's rows back (nil: cold)
}

var (
	slotsMu   sync.Mutex
	freeSlots []*slot
	slotNo    int
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

// copyTemplate copies the template to a file of its own, named after
// kind.
func copyTemplate(t testing.TB, kind string) (string, error) {
	tp := theTemplate(t)
	b, err := os.ReadFile(tp.path)
	if err != nil {
		return "", fmt.Errorf("read the template: %w", err)
	}
	slotsMu.Lock()
	slotNo++
	path := filepath.Join(tmplDir, fmt.Sprintf("%s-%d.sqlite", kind, slotNo))
	slotsMu.Unlock()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("copy the template: %w", err)
	}
	return path, nil
}

// newSlot copies the template to a slot of its own.
func newSlot(t testing.TB) (*slot, error) {
	if _, err := theDriver(); err != nil {
		return nil, err
	}
	path, err := copyTemplate(t, "slot")
	if err != nil {
		return nil, err
	}
	// Foreign keys off: the tables are emptied and filled in any order, and
	// a PRAGMA that turned them off per transaction would expire every
	// statement the connection keeps.
	reset, err := sql.Open(simDriverName, "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	reset.SetMaxOpenConns(1)
	return &slot{path: path, driver: simDriverName, reset: reset}, nil
}

// coldSlot is a case's database as it was before slots: a copy of the
// template of its own, whose processes open their connections through
// licensor's driver alone, nothing kept. Remove it with removeDB.
func coldSlot(t testing.TB) *slot {
	path, err := copyTemplate(t, "cold")
	if err != nil {
		t.Fatal(err)
	}
	return &slot{path: path}
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
	// The write-ahead log emptied into the file, as a fresh copy has none:
	// no case inherits the log, nor checkpoints at a point set by the cases
	// before it. Every other connection is idle, so nothing is busy.
	var busy, logged, moved int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &moved); err != nil {
		return fmt.Errorf("reset: checkpoint: %w", err)
	}
	if busy != 0 {
		return errors.New("reset: checkpoint: busy (a connection of the case still reads or writes)")
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
var resetStatements = sync.OnceValues(func() ([]string, error) { return rowStatements(tmpl.path) })

// rowStatements are the statements that empty the tables of the database
// at path and fill them with its rows as they are now.
func rowStatements(path string) ([]string, error) {
	inner, err := database.SQLiteDriver()
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector{inner, "file:" + path + "?_pragma=query_only(1)"})
	defer db.Close()
	tables, err := texts(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_stat%' ORDER BY name")
	if err != nil {
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
		ins, err := tableRows(db, tb)
		if err != nil {
			return nil, err
		}
		out = append(out, ins...)
	}
	return out, nil
}

// tableRows are the INSERTs of table tb's rows in rowid order, each
// with its rowid where the rowid is not a column of its own (an INTEGER
// PRIMARY KEY), so that a row comes back where it was.
func tableRows(db *sql.DB, tb string) ([]string, error) {
	type column struct {
		name, typ string
		pk        int
	}
	var cols []column
	rows, err := db.Query(fmt.Sprintf(`SELECT name, type, pk FROM pragma_table_info(%s)`, quoteText(tb)))
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ, &c.pk); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		cols = append(cols, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, tb).Scan(&ddl); err != nil {
		return nil, err
	}
	pks := 0
	aliased := false
	for _, c := range cols {
		if c.pk > 0 {
			pks++
			aliased = strings.EqualFold(c.typ, "INTEGER")
		}
	}
	rowid := !(pks == 1 && aliased) && !strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID")
	var names, values []string
	if rowid {
		names, values = append(names, "rowid"), append(values, "quote(rowid)")
	}
	for _, c := range cols {
		names = append(names, fmt.Sprintf("%q", c.name))
		values = append(values, fmt.Sprintf("quote(%q)", c.name))
	}
	order := ""
	if rowid || (pks == 1 && aliased) {
		order = " ORDER BY rowid"
	}
	q := fmt.Sprintf(`SELECT 'INSERT INTO %q (%s) VALUES (' || %s || ')' FROM %q%s`,
		tb, strings.Join(names, ", "), strings.Join(values, ` || ', ' || `), tb, order)
	return texts(db, q)
}

// texts are the rows of a query of one text column.
func texts(db *sql.DB, q string) ([]string, error) {
	rows, err := db.Query(q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		out = append(out, v)
	}
	return out, errors.Join(rows.Err(), rows.Close())
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
// for row (their rowids and the AUTOINCREMENT counters too), and its
// write-ahead log is empty; and seeds run in warm slots (connections kept,
// rows deleted and inserted again between cases) have the histories they
// have the way cases ran before slots, each in a copy of the template of
// its own through licensor's driver alone, byte for byte.
func TestWarmSlotIsAFreshCopy(t *testing.T) {
	want, err := rowStatements(theTemplate(t).path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSlot(t)
	if err != nil {
		t.Fatal(err)
	}
	defer s.drop()
	for seed := uint64(1000); seed < 1005; seed++ {
		runPlanIn(t, s, genPlan(newPCG(seed)))
		if err := s.restore(); err != nil {
			t.Fatal(err)
		}
		got, err := rowStatements(s.path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after seed %d and a reset the slot's rows are not the template's:\n%s", seed,
				firstDiff(strings.Join(want, "\n"), strings.Join(got, "\n")))
		}
		if st, err := os.Stat(s.path + "-wal"); err == nil && st.Size() != 0 {
			t.Fatalf("after seed %d and a reset the slot's log holds %d bytes", seed, st.Size())
		}
	}
	d, err := theDriver()
	if err != nil {
		t.Fatal(err)
	}
	if d.kept(s.path) == 0 {
		t.Fatal("no connection of the slot was kept: the slot is not warm")
	}

	crashes := 0
	for seed := uint64(1); seed <= 150; seed++ {
		p := genPlan(newPCG(seed))
		if slices.ContainsFunc(p.Ops, func(o op) bool { return o.Kind == opCrash }) {
			crashes++
		}
		cold := coldSlot(t)
		before := runPlanIn(t, cold, p)
		removeDB(cold.path)
		warm := runPlan(t, p)
		if warm.History != before.History || strings.Join(warm.Violations, "\n") != strings.Join(before.Violations, "\n") {
			t.Fatalf("seed %d: its history in a warm slot differs from its history in a copy of its own:\n%s",
				seed, firstDiff(before.History+strings.Join(before.Violations, "\n"), warm.History+strings.Join(warm.Violations, "\n")))
		}
	}
	if crashes < 50 {
		t.Fatalf("only %d of the 150 plans crash a process: the comparison misses the kept connections of a crash", crashes)
	}
}

// TestKeptConnectionRollsBack: a connection a crash leaves goes back
// without what its transaction wrote, as SQLite rolls back a closed
// connection's transaction, and begins anew in the next pool: closed by
// the driver inside a transaction, or dropped by database/sql when the
// crash cancels its context in a transaction or while it waits for the
// write lock.
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
	dsn := database.SQLiteDSN(simConfig(s.path).DB)
	ctx := context.Background()
	// pool is a process's pool on the slot (closed by the caller: the
	// crash is its closing).
	pool := func(t *testing.T) *sql.DB {
		t.Helper()
		db, err := sql.Open(simDriverName, dsn)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	consumers := func(db *sql.DB) int {
		t.Helper()
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM consumers").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("closed in a transaction", func(t *testing.T) {
		c, err := d.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		kc := c.(*keptConn)
		if _, err := kc.BeginTx(ctx, driver.TxOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.ExecContext(ctx, "DELETE FROM consumers", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		db := pool(t)
		defer db.Close()
		if got := consumers(db); got != 3 {
			t.Fatalf("%d consumers: the closed connection's transaction landed", got)
		}
	})

	t.Run("cancelled in a transaction", func(t *testing.T) {
		db := pool(t)
		cctx, cancel := context.WithCancel(ctx)
		tx, err := db.BeginTx(cctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("DELETE FROM consumers"); err != nil {
			t.Fatal(err)
		}
		cancel() // the crash: database/sql rolls back and drops the connection
		_ = db.Close()
		again := pool(t)
		defer again.Close()
		if got := consumers(again); got != 3 {
			t.Fatalf("%d consumers: the cancelled transaction landed", got)
		}
		if _, err := again.Exec("UPDATE consumers SET name = name"); err != nil {
			t.Fatalf("the kept connection cannot write: %v", err)
		}
	})

	t.Run("cancelled while waiting for the lock", func(t *testing.T) {
		holder := pool(t)
		defer holder.Close()
		htx, err := holder.Begin() // BEGIN IMMEDIATE: the write lock
		if err != nil {
			t.Fatal(err)
		}
		db := pool(t)
		if err := db.Ping(); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			tx, err := db.BeginTx(cctx, nil)
			if err == nil {
				_ = tx.Rollback()
				err = errors.New("began while another connection held the write lock")
			}
			errc <- err
		}()
		// The connection taken: the BEGIN waits for the holder's lock.
		for deadline := time.Now().Add(10 * time.Second); db.Stats().InUse == 0; {
			if time.Now().After(deadline) {
				t.Fatal("the BEGIN never took its connection")
			}
			runtime.Gosched()
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) && !strings.Contains(fmt.Sprint(err), "interrupt") {
			t.Fatalf("the waiting BEGIN ended with %v, want the cancellation", err)
		}
		_ = db.Close()
		if err := htx.Rollback(); err != nil {
			t.Fatal(err)
		}
		again := pool(t)
		defer again.Close()
		tx, err := again.Begin()
		if err != nil {
			t.Fatalf("a kept connection cannot begin after an interrupted one: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	})
	if d.kept(s.path) == 0 {
		t.Fatal("no connection was kept")
	}
}

// TestKeptConnectionOffersWhatLicensorsDoes: database/sql looks for
// optional interfaces on a connection; a kept one must offer each that
// licensor's own offers, or the simulation would run without what
// production has.
func TestKeptConnectionOffersWhatLicensorsDoes(t *testing.T) {
	s, err := newSlot(t)
	if err != nil {
		t.Fatal(err)
	}
	defer s.drop()
	inner, err := database.SQLiteDriver()
	if err != nil {
		t.Fatal(err)
	}
	own, err := inner.Open("file:" + s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	d, err := theDriver()
	if err != nil {
		t.Fatal(err)
	}
	kept, err := d.Open("file:" + s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.(*keptConn).fullConn.Close()
	for _, iface := range []reflect.Type{
		reflect.TypeFor[driver.ConnPrepareContext](), reflect.TypeFor[driver.ConnBeginTx](),
		reflect.TypeFor[driver.ExecerContext](), reflect.TypeFor[driver.QueryerContext](),
		reflect.TypeFor[driver.Pinger](), reflect.TypeFor[driver.SessionResetter](),
		reflect.TypeFor[driver.Validator](), reflect.TypeFor[driver.NamedValueChecker](),
	} {
		if reflect.TypeOf(own).Implements(iface) && !reflect.TypeOf(kept).Implements(iface) {
			t.Errorf("licensor's SQLite connection is a %s and a kept one is not", iface)
		}
	}
}
