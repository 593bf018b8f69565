package sim

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// parkingPool is a process's connection pool with its database points:
// the schedule may hold the process just before a transaction begins or a
// write outside one is sent, where no lock and no connection is held, and
// release it there or crash the process (the write is then never sent).
// A crash inside a transaction is a crash before it: SQLite rolls back
// whatever a closed connection left uncommitted.
type parkingPool struct {
	*sql.DB
	park func(ctx context.Context, what string) error
}

var (
	_ gorm.ConnPool       = (*parkingPool)(nil)
	_ gorm.TxBeginner     = (*parkingPool)(nil)
	_ gorm.GetDBConnector = (*parkingPool)(nil)
)

// withPoints gives db its database points: GORM sends every statement
// through the pool, which parks before a transaction begins and before a
// write outside one.
func withPoints(db *gorm.DB, park func(ctx context.Context, what string) error) error {
	sqlDB, ok := db.ConnPool.(*sql.DB)
	if !ok {
		return fmt.Errorf("sim: the process's pool is a %T, not the *sql.DB its database points wrap", db.ConnPool)
	}
	pp := &parkingPool{DB: sqlDB, park: park}
	db.ConnPool, db.Statement.ConnPool = pp, pp
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
