package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Seeding copies a real row, made through the API, n times with its unique
// columns changed, in multi-row INSERTs inside transactions. Every column
// is copied as the template row holds it (read with SELECT *), so a column
// added by a later migration is copied too; only the overridden ones change.

const (
	seedBatchRows = 250    // rows per INSERT
	seedTxRows    = 25_000 // rows per transaction
)

// rowCopier inserts copies of one template row.
type rowCopier struct {
	table  string
	cols   []string // the inserted columns
	values []any    // the template's values, by cols
	index  map[string]int
}

// newRowCopier reads the template row (WHERE col = val) and drops the
// skipped columns (an AUTO_INCREMENT id).
func newRowCopier(ctx context.Context, db *sql.DB, table, col string, val any, skip ...string) (*rowCopier, error) {
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+table+" WHERE "+col+" = ?", val)
	if err != nil {
		return nil, fmt.Errorf("read the template row of %s: %w", table, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: no template row where %s = %v", table, col, val)
	}
	raw := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	c := &rowCopier{table: table, index: map[string]int{}}
	for i, n := range names {
		if contains(skip, n) {
			continue
		}
		c.index[n] = len(c.cols)
		c.cols = append(c.cols, n)
		c.values = append(c.values, raw[i])
	}
	return c, rows.Err()
}

// copies inserts n copies; set changes row i's unique columns in place
// (by column name) before it is inserted.
func (c *rowCopier) copies(ctx context.Context, db *sql.DB, n int, set func(i int, row func(col string, v any))) error {
	row := make([]any, len(c.cols))
	put := func(col string, v any) {
		j, ok := c.index[col]
		if !ok {
			panic("seed: no column " + col + " in " + c.table)
		}
		row[j] = v
	}
	placeholders := "(" + strings.TrimSuffix(strings.Repeat("?,", len(c.cols)), ",") + ")"
	head := "INSERT INTO " + c.table + " (" + strings.Join(c.cols, ", ") + ") VALUES "
	for done := 0; done < n; {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		txEnd := min(n, done+seedTxRows)
		for done < txEnd {
			batch := min(seedBatchRows, txEnd-done)
			args := make([]any, 0, batch*len(c.cols))
			for k := 0; k < batch; k++ {
				copy(row, c.values)
				set(done+k, put)
				args = append(args, row...)
			}
			q := head + strings.TrimSuffix(strings.Repeat(placeholders+",", batch), ",")
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				_ = tx.Rollback()
				return fmt.Errorf("insert into %s: %w", c.table, err)
			}
			done += batch
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// count runs a COUNT(*) query.
func count(ctx context.Context, db *sql.DB, q string, args ...any) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

// seedIdempotency fills idempotency_keys up to total rows with copies of
// the completed record of (consumer, licenses.store, key): new
// idempotency_key and public_id (the two unique indexes), the rest as is.
func seedIdempotency(ctx context.Context, db *sql.DB, consumerID, key string, total int) (int, error) {
	have, err := count(ctx, db, "SELECT COUNT(*) FROM idempotency_keys")
	if err != nil {
		return 0, err
	}
	var id int64
	err = db.QueryRowContext(ctx, "SELECT id FROM idempotency_keys WHERE consumer_id = ? AND operation = ? AND idempotency_key = ? AND status = 'completed'",
		consumerID, "licenses.store", key).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("the template idempotency record: %w", err)
	}
	c, err := newRowCopier(ctx, db, "idempotency_keys", "id", id, "id")
	if err != nil {
		return 0, err
	}
	n := total - have
	if n <= 0 {
		return 0, nil
	}
	tag := randomHex(4)
	entropy := ulid.Monotonic(rand.Reader, 0)
	err = c.copies(ctx, db, n, func(i int, set func(string, any)) {
		set("idempotency_key", fmt.Sprintf("seed-%s-%08d", tag, i))
		set("public_id", ulid.MustNew(ulid.Now(), entropy).String())
	})
	return n, err
}

// seedLicenses gives the consumer total licenses, copies of its license
// id: each with a new id (a ULID of its created_at), domain (and
// active_domain) and created_at/updated_at, older than the template and
// one millisecond apart; license_key keeps its ciphertext.
func seedLicenses(ctx context.Context, db *sql.DB, consumerID, licenseID string, total int) (int, error) {
	have, err := count(ctx, db, "SELECT COUNT(*) FROM licenses WHERE consumer_id = ?", consumerID)
	if err != nil {
		return 0, err
	}
	c, err := newRowCopier(ctx, db, "licenses", "id", licenseID)
	if err != nil {
		return 0, err
	}
	n := total - have
	if n <= 0 {
		return 0, nil
	}
	tag := randomHex(4)
	start := time.Now().UTC().Add(-time.Duration(n+1000) * time.Millisecond).Truncate(time.Millisecond)
	entropy := ulid.Monotonic(rand.Reader, 0)
	err = c.copies(ctx, db, n, func(i int, set func(string, any)) {
		at := start.Add(time.Duration(i) * time.Millisecond)
		domain := fmt.Sprintf("s%d-%s.seed.test", i, tag)
		set("id", ulid.MustNew(ulid.Timestamp(at), entropy).String())
		set("domain", domain)
		set("active_domain", domain)
		set("created_at", at)
		set("updated_at", at)
	})
	return n, err
}
