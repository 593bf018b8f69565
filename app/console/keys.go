package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/database"
)

const keysRotateUsage = `usage: licensor keys rotate [--batch N]

Re-encrypts the secrets kept at rest under the current APP_KEY: license keys
(licenses.license_key), stored idempotent responses
(idempotency_keys.response_body) and the requests kept to finish an intent
(idempotency_keys.request_body: a vendor event carries a license key). A value sealed under a key of
APP_PREVIOUS_KEYS, or written in plaintext before encryption at rest, is
sealed anew; a value already under APP_KEY is left alone, so a second run
changes nothing. Rows are read and rewritten in batches, each its own short
transaction, and a row the application rewrote meanwhile is left to it: the
command is safe to run while serve runs. It prints what it did per column,
and fails (exit 1) when a value opens under no configured key.

To rotate APP_KEY:
  1. make a key: echo base64:$(head -c 32 /dev/urandom | base64)
  2. on every replica set APP_PREVIOUS_KEYS=<the old APP_KEY> and
     APP_KEY=<the new key>, and restart them all: from then on every replica
     writes under the new key and still reads the old one
  3. run licensor keys rotate (again, if it was interrupted)
  4. drop the old key from APP_PREVIOUS_KEYS on every replica, and restart.
API tokens are signed with the new APP_KEY from step 2; those issued under
the old key keep verifying while it is in APP_PREVIOUS_KEYS and stop at
step 4: issue new ones before then. Key digests in logs and intents change
with APP_KEY too.

flags:
`

// keysCmd is `licensor keys rotate`.
func keysCmd(ctx context.Context, e env) error {
	if len(e.args) == 0 || e.args[0] != "rotate" {
		fmt.Fprint(e.stderr, keysRotateUsage)
		if len(e.args) > 0 && (e.args[0] == "-h" || e.args[0] == "--help") {
			return nil
		}
		if len(e.args) == 0 {
			return usagef("keys: name a subcommand: rotate")
		}
		return usagef("keys: unknown subcommand %q (rotate)", e.args[0])
	}
	e.args = e.args[1:]
	fs := flag.NewFlagSet("keys rotate", flag.ContinueOnError)
	batch := fs.Int("batch", 500, "rows per transaction")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), keysRotateUsage)
		fs.PrintDefaults()
	}
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("keys rotate: unexpected argument %q", fs.Arg(0))
	}
	if *batch < 1 {
		return usagef("keys rotate: --batch must be at least 1")
	}
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	var errs []error
	for _, col := range sealedColumns {
		r, err := col.rotate(ctx, b.DB, b.Cipher, *batch)
		fmt.Fprintf(e.stdout, "%s.%s: %d checked, %d re-encrypted, %d already under APP_KEY, %d changed meanwhile, %d unreadable\n",
			col.table, col.column, r.checked, r.resealed, r.current, r.raced, r.unreadableCount)
		if r.unreadableCount > 0 {
			err = errors.Join(err, fmt.Errorf("keys rotate: %d %s value(s) open under no key of APP_KEY and APP_PREVIOUS_KEYS (ids %s); they are left as they are",
				r.unreadableCount, col.table, strings.Join(r.unreadable, ", ")))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errors.Join(errs...), b.Close())
}

// sealedColumn is a column whose values are encrypted at rest.
type sealedColumn struct {
	table, column string
	text          bool // a TEXT column (written as a string), else a BLOB (bytes)
	intID         bool // the id is an integer, else text (a ULID)
}

// sealedColumns are every column the application encrypts at rest.
var sealedColumns = []sealedColumn{
	{table: "licenses", column: "license_key", text: true},
	{table: "idempotency_keys", column: "response_body", intID: true},
	{table: "idempotency_keys", column: "request_body", intID: true}, // a vendor event carries a license key
}

// rotation is what rotating one column did.
type rotation struct {
	checked, resealed, current, raced int
	unreadable                        []string // ids (not secret), the first maxUnreadable of them
	unreadableCount                   int
}

const maxUnreadable = 20

// sealedRow is one row of a sealed column: its id, and the value as stored.
type sealedRow struct {
	ID     string
	Stored []byte
}

// rotate re-encrypts the column under the current key, batch by batch in id
// order, each batch one short transaction. A row is rewritten only if it
// still holds the value read (a compare-and-set), so a concurrent write by
// the application, already under the current key, wins.
func (col sealedColumn) rotate(ctx context.Context, db *gorm.DB, c *crypt.Cipher, batch int) (rotation, error) {
	var total rotation
	var after any = ""
	if col.intID {
		after = uint64(0)
	}
	for {
		var (
			r    rotation
			last string
			n    int
		)
		// A lost lock conflict rolled the whole batch back: it runs again.
		res := database.RetryOnConflict(ctx, func() *gorm.DB {
			r, last, n = rotation{}, "", 0
			return &gorm.DB{Error: db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				var rows []sealedRow
				err := tx.Table(col.table).Select("id", col.column+" AS stored").
					Where("id > ?", after).Where(col.column + " IS NOT NULL").
					Order("id").Limit(batch).Scan(&rows).Error
				if err != nil {
					return fmt.Errorf("read %s: %w", col.table, err)
				}
				n = len(rows)
				for _, row := range rows {
					last = row.ID
					if err := col.reseal(tx, c, row, &r); err != nil {
						return err
					}
				}
				return nil
			})}
		})
		if res.Error != nil {
			return total, fmt.Errorf("keys rotate: %s.%s: %w", col.table, col.column, res.Error)
		}
		total.add(r)
		if n < batch {
			return total, nil
		}
		after = last // the next batch: the ids after the last one read
		if col.intID {
			id, err := strconv.ParseUint(last, 10, 64)
			if err != nil {
				return total, fmt.Errorf("keys rotate: %s: id %q: %w", col.table, last, err)
			}
			after = id
		}
	}
}

// reseal rewrites one row under the current key when it is not already.
func (col sealedColumn) reseal(tx *gorm.DB, c *crypt.Cipher, row sealedRow, r *rotation) error {
	r.checked++
	out, changed, err := c.Reseal(string(row.Stored))
	switch {
	case err != nil: // no key opens it; the error says nothing of the value
		r.unreadableCount++
		if len(r.unreadable) < maxUnreadable {
			r.unreadable = append(r.unreadable, row.ID)
		}
		return nil
	case !changed:
		r.current++
		return nil
	}
	var value, was any = []byte(out), row.Stored
	if col.text {
		value, was = out, string(row.Stored)
	}
	res := tx.Table(col.table).Where("id = ? AND "+col.column+" = ?", row.ID, was).Update(col.column, value)
	if res.Error != nil {
		return fmt.Errorf("write %s %s: %w", col.table, row.ID, res.Error)
	}
	if res.RowsAffected == 1 {
		r.resealed++
	} else {
		r.raced++ // rewritten (or deleted) by the application since it was read
	}
	return nil
}

func (t *rotation) add(r rotation) {
	t.checked += r.checked
	t.resealed += r.resealed
	t.current += r.current
	t.raced += r.raced
	t.unreadableCount += r.unreadableCount
	for _, id := range r.unreadable {
		if len(t.unreadable) < maxUnreadable {
			t.unreadable = append(t.unreadable, id)
		}
	}
}
