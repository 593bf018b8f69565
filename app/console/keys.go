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
(idempotency_keys.response_body), the requests kept to finish an intent
(idempotency_keys.request_body: a vendor event carries a license key), the
consumer events (consumer_events.data: a license event carries its key) and
the webhook endpoints' signing secrets (webhook_endpoints.secret). A value sealed under a key of
APP_PREVIOUS_KEYS, or written in plaintext before encryption at rest, is
sealed anew; a value already under APP_KEY is left alone, so a second run
changes nothing. Rows are read and rewritten in batches, each its own short
transaction, and a row the application rewrote meanwhile is left to it: the
command is safe to run while serve runs. It prints what it did per column,
and fails (exit 1) when a value opens under no configured key.

To rotate APP_KEY, each step a rolling restart (one replica at a time), so
that no replica ever meets a value sealed under a key it does not hold:
  1. make a key (echo base64:$(head -c 32 /dev/urandom | base64)) and add it
     to APP_PREVIOUS_KEYS on every replica, APP_KEY unchanged; rolling
     restart. Every replica can now read the new key; none writes under it
  2. switch: on every replica APP_KEY=<the new key> and
     APP_PREVIOUS_KEYS=<the old APP_KEY>; rolling restart. A switched
     replica writes under the new key (which the others read since step 1)
     and still reads the old one
  3. run licensor keys rotate (again, if it was interrupted)
  4. run licensor keys status until it reports no value under a previous
     key (a value it counts as unreadable opens under no key given to it)
  5. drop the old key from APP_PREVIOUS_KEYS on every replica; rolling
     restart.
Skipping step 1 (switching a replica while another holds only the old key)
makes the other answer 503 key_unavailable for what the switched one wrote.
API tokens are signed with APP_KEY, and keys rotate cannot re-sign them: a
token signed with the old key (every token issued before its replica was
switched at step 2) verifies while the old key is in APP_PREVIOUS_KEYS, and
is refused (401) from step 5 on. Issue new tokens after step 2 (signed with
the new key, which every replica verifies since step 1) and hand them out
before step 5. Key digests in logs and intents change with APP_KEY, replica
by replica at step 2.

flags:
`

const keysStatusUsage = `usage: licensor keys status [--batch N] [--json]

Counts the values of each column sealed at rest (those keys rotate
re-encrypts) by what opens them: APP_KEY, each key of APP_PREVIOUS_KEYS (by
its position in the list, and its fingerprint: 8 hex characters derived
one-way from the key, the same for one key on every replica, never the key),
nothing at all (plaintext, written before encryption at rest), or no key it
is given (unreadable: sealed under a key missing here, or damaged). It reads
in batches, changes nothing, and is safe to run while serve runs; the counts
are per batch, not one snapshot. The last line says whether a previous key
still seals values: once none does (after keys rotate), that key can be
dropped from APP_PREVIOUS_KEYS (step 5 of keys rotate --help). Exit 0 when
it could read the database, whatever it counted.

flags:
`

// keysCmd is `licensor keys rotate|status`.
func keysCmd(ctx context.Context, e env) error {
	return runSubcommand(ctx, e, "keys", "Secrets encrypted at rest under APP_KEY; `licensor keys rotate --help` gives the rotation procedure.", []subcommand{
		{"rotate", "re-encrypt every sealed value under the current APP_KEY", keysRotate},
		{"status", "count the sealed values under each configured key; changes nothing", keysStatus},
	})
}

// keysFlags parses --batch, and --json when asJSON is not nil; ok is false
// when the command should stop there (help printed, or err).
func keysFlags(e env, name, usage, batchHelp string, asJSON *bool) (batch int, ok bool, err error) {
	fs := flag.NewFlagSet("keys "+name, flag.ContinueOnError)
	fs.IntVar(&batch, "batch", 500, batchHelp)
	if asJSON != nil {
		fs.BoolVar(asJSON, "json", false, "print a JSON object instead of a table")
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if ok, err := parseFlags(fs, e); !ok {
		return 0, false, err
	}
	if fs.NArg() > 0 {
		return 0, false, usagef("keys %s: unexpected argument %q", name, fs.Arg(0))
	}
	if batch < 1 {
		return 0, false, usagef("keys %s: --batch must be at least 1", name)
	}
	return batch, true, nil
}

func keysRotate(ctx context.Context, e env) error {
	batch, ok, err := keysFlags(e, "rotate", keysRotateUsage, "rows per transaction", nil)
	if !ok {
		return err
	}
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	var errs []error
	for _, col := range sealedColumns {
		r, err := col.rotate(ctx, b.DB, b.Cipher, batch)
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

type sealedColumn struct {
	table, column string
	text          bool // a TEXT column (written as a string), else a BLOB (bytes)
	intID         bool // the id is an integer, else text (a ULID)
}

// sealedColumns are every column the application encrypts at rest.
var sealedColumns = []sealedColumn{
	{table: "licenses", column: "license_key", text: true},
	{table: "idempotency_keys", column: "response_body", intID: true},
	{table: "idempotency_keys", column: "request_body", intID: true},    // a vendor event carries a license key
	{table: "consumer_events", column: "data", text: true, intID: true}, // a license event carries its key
	{table: "webhook_endpoints", column: "secret", text: true},
}

type rotation struct {
	checked, resealed, current, raced int
	unreadable                        []string // ids (not secret), the first maxUnreadable of them
	unreadableCount                   int
}

const maxUnreadable = 20

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
	after := col.firstID()
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
				rows, err := col.readBatch(tx, after, batch)
				if err != nil {
					return err
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
		next, err := col.nextID(last)
		if err != nil {
			return total, fmt.Errorf("keys rotate: %w", err)
		}
		after = next
	}
}

func (col sealedColumn) firstID() any {
	if col.intID {
		return uint64(0)
	}
	return ""
}

func (col sealedColumn) readBatch(db *gorm.DB, after any, batch int) ([]sealedRow, error) {
	var rows []sealedRow
	err := db.Table(col.table).Select("id", col.column+" AS stored").
		Where("id > ?", after).Where(col.column + " IS NOT NULL").
		Order("id").Limit(batch).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", col.table, err)
	}
	return rows, nil
}

func (col sealedColumn) nextID(last string) (any, error) {
	if !col.intID {
		return last, nil
	}
	id, err := strconv.ParseUint(last, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: id %q: %w", col.table, last, err)
	}
	return id, nil
}

// reseal rewrites one row under the current key when it is not already. An
// empty value holds nothing to seal: it is left as it is, and not counted.
func (col sealedColumn) reseal(tx *gorm.DB, c *crypt.Cipher, row sealedRow, r *rotation) error {
	if len(row.Stored) == 0 {
		return nil
	}
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
