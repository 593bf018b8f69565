package database

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
)

// The SQLite driver's statements, kept per connection.
//
// Parsing a statement is most of what a short SQLite statement costs with
// the pure-Go driver, and database/sql prepares again where it could reuse:
// a statement GORM first met inside a transaction was prepared on that
// transaction, and every later transaction prepared it once more
// (Tx.StmtContext cannot reuse a statement that belongs to another
// transaction); a statement sent without preparing is parsed each time.
// cachingDriver keeps each connection's statements instead, by their text,
// so that a statement is parsed once per connection whatever path reaches
// it: GORM's builder, database.Query, a transaction, a raw Exec. A cached
// statement is reset, never finalized, between uses, and finalized when its
// connection closes or when it falls out of the connection's
// stmtCacheSize most recent.

// stmtCacheSize bounds each connection's statements: an IN list of another
// length is another text.
const stmtCacheSize = 256

// sqliteCachingDriverName is the name cachingDriver is registered under.
const sqliteCachingDriverName = "licensor-sqlite"

// registerCachingDriver registers cachingDriver once, and returns it.
var registerCachingDriver = sync.OnceValues(func() (driver.Driver, error) {
	db, err := sql.Open("sqlite", "") // the pure-Go driver, as it registered itself
	if err != nil {
		return nil, err
	}
	d := cachingDriver{db.Driver()}
	sql.Register(sqliteCachingDriverName, d)
	return d, db.Close()
})

// SQLiteDriver is the driver licensor's SQLite connections open through:
// the pure-Go driver, each connection with its statement cache. A test that
// wraps it registers the wrapper under a name of its own and sets
// config.DB.SQLiteDriver to that name.
func SQLiteDriver() (driver.Driver, error) { return registerCachingDriver() }

// cachingDriver opens connections of the wrapped driver with a statement
// cache each.
type cachingDriver struct{ driver.Driver }

func (d cachingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return newCachingConn(c)
}

// innerConn is what the SQLite driver's connection offers and the cache
// relies on.
type innerConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// innerStmt is what the SQLite driver's statement offers.
type innerStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

var errNotCachable = errors.New("database: the SQLite driver's connection lacks a method the statement cache needs")

// cachingConn is one connection and its statements. The cache needs no
// lock of its own: database/sql calls every method of a connection, and of
// its statements and rows, under that connection's lock (driverConn's
// mutex), also when another goroutine closes rows whose context ended or a
// statement it no longer needs. Nothing else may touch the cache. A
// statement whose rows are still open is busy, and a second use of its text
// meanwhile gets a statement of its own.
type cachingConn struct {
	innerConn
	stmts map[string]*list.Element // of *cachedStmt, most recent first in order
	order *list.List
}

type cachedStmt struct {
	text string
	s    innerStmt
	busy bool // its rows are open
	held int  // handed to database/sql and not closed by it yet
}

func newCachingConn(c driver.Conn) (driver.Conn, error) {
	ic, ok := c.(innerConn)
	if !ok {
		return nil, errors.Join(errNotCachable, c.Close())
	}
	return &cachingConn{innerConn: ic, stmts: map[string]*list.Element{}, order: list.New()}, nil
}

// stmtCacheMaxText is the longest text cached: a longer one (a batch
// insert of many rows, say) is prepared for its use alone, so that the
// cache's memory stays bounded by its size.
const stmtCacheMaxText = 4 << 10

// cachable is false of a text of several statements (the driver parses
// those again on every run anyway) and of a long one (stmtCacheMaxText).
func cachable(text string) bool {
	return len(text) <= stmtCacheMaxText && !strings.Contains(strings.TrimRight(text, "; \t\r\n"), ";")
}

// stmt is the connection's statement for text, prepared now if it has none
// (or if its own is busy: then one of its own, closed after use).
func (c *cachingConn) stmt(ctx context.Context, text string) (*cachedStmt, error) {
	if err := ctx.Err(); err != nil { // as the driver's own prepare answers
		return nil, err
	}
	if e, ok := c.stmts[text]; ok {
		cs := e.Value.(*cachedStmt)
		if !cs.busy {
			c.order.MoveToFront(e)
			return cs, nil
		}
	}
	s, err := c.innerConn.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	is, ok := s.(innerStmt)
	if !ok {
		return nil, errors.Join(errNotCachable, s.Close())
	}
	cs := &cachedStmt{text: text, s: is}
	if _, taken := c.stmts[text]; !taken && c.order != nil && cachable(text) {
		c.stmts[text] = c.order.PushFront(cs)
		for c.order.Len() > stmtCacheSize {
			c.evict(c.order.Back())
		}
	}
	return cs, nil
}

// cached reports whether cs is the connection's (else the caller closes it).
func (c *cachingConn) cached(cs *cachedStmt) bool {
	e, ok := c.stmts[cs.text]
	return ok && e.Value.(*cachedStmt) == cs
}

// evict drops a statement from the cache; one still in use is finalized
// when its last use ends.
func (c *cachingConn) evict(e *list.Element) {
	cs := e.Value.(*cachedStmt)
	c.order.Remove(e)
	delete(c.stmts, cs.text)
	_ = c.done(cs)
}

// done finalizes cs once nothing uses it and the cache does not keep it.
func (c *cachingConn) done(cs *cachedStmt) error {
	if cs.busy || cs.held > 0 || c.cached(cs) {
		return nil
	}
	return cs.s.Close()
}

func (c *cachingConn) Prepare(text string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), text)
}

// PrepareContext hands out the cached statement; its Close leaves it
// cached.
func (c *cachingConn) PrepareContext(ctx context.Context, text string) (driver.Stmt, error) {
	cs, err := c.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	cs.held++
	return &handedStmt{c: c, cs: cs}, nil
}

func (c *cachingConn) ExecContext(ctx context.Context, text string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	res, err := cs.s.ExecContext(ctx, args)
	return res, also(err, c.done(cs))
}

func (c *cachingConn) QueryContext(ctx context.Context, text string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	return c.query(ctx, cs, args)
}

// query runs cs, busy until its rows close.
func (c *cachingConn) query(ctx context.Context, cs *cachedStmt, args []driver.NamedValue) (driver.Rows, error) {
	if cs.busy { // a handed statement queried again before its rows closed
		own, err := c.innerConn.PrepareContext(ctx, cs.text)
		if err != nil {
			return nil, err
		}
		is, ok := own.(innerStmt)
		if !ok {
			return nil, errors.Join(errNotCachable, own.Close())
		}
		cs = &cachedStmt{text: cs.text, s: is}
	}
	r, err := cs.s.QueryContext(ctx, args)
	if err != nil {
		return nil, also(err, c.done(cs))
	}
	cs.busy = true
	inner, ok := r.(innerRows)
	if !ok {
		return nil, errors.Join(errNotCachable, r.Close(), c.release(cs))
	}
	return &cachingRows{innerRows: inner, c: c, cs: cs}, nil
}

// release ends the use of cs by its rows.
func (c *cachingConn) release(cs *cachedStmt) error {
	cs.busy = false
	return c.done(cs)
}

// Close finalizes the statements, then closes the connection (database/sql
// closes a connection's statements and rows first).
func (c *cachingConn) Close() error {
	if c.order == nil { // closed already
		return c.innerConn.Close()
	}
	var errs []error
	for e := c.order.Front(); e != nil; e = e.Next() {
		errs = append(errs, e.Value.(*cachedStmt).s.Close())
	}
	c.stmts, c.order = map[string]*list.Element{}, nil // nothing is cached after
	return errors.Join(append(errs, c.innerConn.Close())...)
}

// handedStmt is a cached statement as database/sql holds it: closing it
// keeps it cached (an uncached one is closed).
type handedStmt struct {
	c      *cachingConn
	cs     *cachedStmt
	closed bool
}

func (h *handedStmt) Close() error {
	if h.closed {
		return nil
	}
	h.closed = true
	h.cs.held--
	return h.c.done(h.cs)
}
func (h *handedStmt) NumInput() int { return h.cs.s.NumInput() }

func (h *handedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return h.ExecContext(context.Background(), namedValues(args))
}

func (h *handedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return h.QueryContext(context.Background(), namedValues(args))
}

func (h *handedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if h.cs.busy {
		return h.c.ExecContext(ctx, h.cs.text, args)
	}
	return h.cs.s.ExecContext(ctx, args)
}

func (h *handedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return h.c.query(ctx, h.cs, args)
}

func namedValues(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

// innerRows is what the SQLite driver's rows offer: the column types GORM
// reads.
type innerRows interface {
	driver.Rows
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

// cachingRows frees its statement for the next use when closed.
type cachingRows struct {
	innerRows
	c      *cachingConn
	cs     *cachedStmt
	closed bool
}

func (r *cachingRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.innerRows.Close()
	if err != nil {
		// The driver could not reset the statement (its last step failed),
		// and so left its text arguments bound to freed buffers: it is
		// finalized, never used again.
		if e, ok := r.c.stmts[r.cs.text]; ok && e.Value.(*cachedStmt) == r.cs {
			r.c.order.Remove(e)
			delete(r.c.stmts, r.cs.text)
		}
	}
	return also(err, r.c.release(r.cs))
}

// also is err, joined with then only when then is an error: the driver's
// errors reach database/sql as they are.
func also(err, then error) error {
	if then == nil {
		return err
	}
	return errors.Join(err, then)
}
