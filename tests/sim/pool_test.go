package sim

import (
	"context"
	"database/sql"
	"strings"

	"gorm.io/gorm"
)

// parkingPool is a process's connection pool with its database points:
// the schedule may hold the process just before a transaction begins or a
// write outside one is sent, where no lock and no connection is held, and
// release it there or crash the process (the write is then never sent).
// A crash inside a transaction is a crash before it: SQLite rolls back
// whatever a closed connection left uncommitted. (Beneath GORM's prepared
// statement cache, the pool sees transactions begin; writes outside one
// are parked by a callback: see withPoints.)
type parkingPool struct {
	*sql.DB
	park func(ctx context.Context, what string) error
}

var (
	_ gorm.ConnPool       = (*parkingPool)(nil)
	_ gorm.TxBeginner     = (*parkingPool)(nil)
	_ gorm.GetDBConnector = (*parkingPool)(nil)
)

// withPoints gives db its database points: the pool beneath GORM's
// prepared statement cache parks before a transaction begins, and a GORM
// callback before each write outside a transaction (which the cache runs
// as a prepared statement, past the pool).
func withPoints(db *gorm.DB, park func(ctx context.Context, what string) error) error {
	if p, ok := db.ConnPool.(*gorm.PreparedStmtDB); ok {
		if sqlDB, ok := p.ConnPool.(*sql.DB); ok {
			p.ConnPool = &parkingPool{DB: sqlDB, park: park}
		}
	} else if sqlDB, ok := db.ConnPool.(*sql.DB); ok {
		pp := &parkingPool{DB: sqlDB, park: park}
		db.ConnPool, db.Statement.ConnPool = pp, pp
		return nil // every write passes the pool
	}
	point := func(tx *gorm.DB) {
		if _, inTx := tx.Statement.ConnPool.(gorm.TxCommitter); inTx || tx.Error != nil {
			return
		}
		if err := park(tx.Statement.Context, "a write to "+tx.Statement.Table); err != nil {
			_ = tx.AddError(err)
		}
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().Before("gorm:create").Register("sim:point", point),
		cb.Update().Before("gorm:update").Register("sim:point", point),
		cb.Delete().Before("gorm:delete").Register("sim:point", point),
		cb.Raw().Before("gorm:raw").Register("sim:point", point),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// GetDBConn is the pool beneath (GORM's db.DB()).
func (p *parkingPool) GetDBConn() (*sql.DB, error) { return p.DB, nil }

// BeginTx parks before the transaction begins.
func (p *parkingPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	if err := p.park(ctx, "a transaction"); err != nil {
		return nil, err
	}
	return p.DB.BeginTx(ctx, opts)
}

// ExecContext parks before a write outside a transaction.
func (p *parkingPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := p.park(ctx, statement(query)); err != nil {
		return nil, err
	}
	return p.DB.ExecContext(ctx, query, args...)
}

// QueryContext parks before a write outside a transaction (an INSERT …
// RETURNING is a query).
func (p *parkingPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if isWrite(query) {
		if err := p.park(ctx, statement(query)); err != nil {
			return nil, err
		}
	}
	return p.DB.QueryContext(ctx, query, args...)
}

// isWrite reports whether the statement q writes.
func isWrite(q string) bool {
	w := strings.ToUpper(strings.Fields(q + " x")[0])
	return w == "INSERT" || w == "UPDATE" || w == "DELETE"
}

// statement is a write's first words, for the history.
func statement(q string) string {
	f := strings.Fields(q)
	return "a statement " + strings.Join(f[:min(3, len(f))], " ")
}
