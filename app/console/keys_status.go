package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/crypt"
)

// keysStatus is `licensor keys status`: what opens each sealed value, by
// column, read in batches; nothing is written.
func keysStatus(ctx context.Context, e env) error {
	var asJSON bool
	batch, ok, err := keysFlags(e, "status", keysStatusUsage, "rows per read", &asJSON)
	if !ok {
		return err
	}
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	st, err := sealedStatus(ctx, b.Read, b.Cipher, batch)
	if err == nil {
		if asJSON {
			err = writeJSON(e.stdout, st)
		} else {
			err = st.write(e.stdout)
		}
	}
	return errors.Join(err, b.Close())
}

// keyStatus is what keys status found (its --json form).
type keyStatus struct {
	Keys    keyFingerprints `json:"keys"`
	Columns []columnCount   `json:"columns"`
	// PreviousInUse says whether a previous key still seals a value: until
	// it does not, no previous key may be dropped.
	PreviousInUse bool `json:"previous_in_use"`
}

// keyFingerprints are the configured keys' fingerprints (crypt's
// Fingerprint: one-way, never the key).
type keyFingerprints struct {
	Current  string   `json:"current"`  // APP_KEY's
	Previous []string `json:"previous"` // APP_PREVIOUS_KEYS', in their order
}

// columnCount is one sealed column's values by what opens them.
type columnCount struct {
	Column     string `json:"column"`     // table.column
	Current    int    `json:"current"`    // under APP_KEY
	Previous   []int  `json:"previous"`   // under each previous key, in APP_PREVIOUS_KEYS' order
	Plaintext  int    `json:"plaintext"`  // written before encryption at rest
	Unreadable int    `json:"unreadable"` // under no configured key, or damaged
}

// sealedStatus counts every sealed column's values under c's keys.
func sealedStatus(ctx context.Context, db *gorm.DB, c *crypt.Cipher, batch int) (keyStatus, error) {
	st := keyStatus{Keys: keyFingerprints{Current: c.Fingerprint(0), Previous: []string{}}, Columns: []columnCount{}}
	for i := 1; i <= c.PreviousKeys(); i++ {
		st.Keys.Previous = append(st.Keys.Previous, c.Fingerprint(i))
	}
	for _, col := range sealedColumns {
		n, err := col.count(ctx, db, c, batch)
		if err != nil {
			return keyStatus{}, err
		}
		for _, p := range n.Previous {
			st.PreviousInUse = st.PreviousInUse || p > 0
		}
		st.Columns = append(st.Columns, n)
	}
	return st, nil
}

// count reads the column batch by batch in id order and counts its values
// by the key that opens them; it writes nothing.
func (col sealedColumn) count(ctx context.Context, db *gorm.DB, c *crypt.Cipher, batch int) (columnCount, error) {
	n := columnCount{Column: col.table + "." + col.column, Previous: make([]int, c.PreviousKeys())}
	after := col.firstID()
	for {
		rows, err := col.readBatch(db.WithContext(ctx), after, batch)
		if err != nil {
			return n, fmt.Errorf("keys status: %w", err)
		}
		for _, row := range rows {
			n.add(c, string(row.Stored))
		}
		if len(rows) < batch {
			return n, nil
		}
		if after, err = col.nextID(rows[len(rows)-1].ID); err != nil {
			return n, fmt.Errorf("keys status: %w", err)
		}
	}
}

// add counts one stored value. An empty one (a revoke's request, whose
// license id is its key) holds nothing to seal: it is not counted.
func (n *columnCount) add(c *crypt.Cipher, stored string) {
	if stored == "" {
		return
	}
	if !c.Encrypted(stored) {
		n.Plaintext++
		return
	}
	i, err := c.KeyIndex(stored)
	switch {
	case err != nil: // opens under no key, or is no well-formed envelope
		n.Unreadable++
	case i == 0:
		n.Current++
	default:
		n.Previous[i-1]++
	}
}

// write prints the status as a table, then what it means; the last line
// says whether a previous key still seals values.
func (st keyStatus) write(w io.Writer) error {
	names := []string{"APP_KEY " + st.Keys.Current}
	for i, fp := range st.Keys.Previous {
		names = append(names, fmt.Sprintf("previous key %d %s", i+1, fp))
	}
	fmt.Fprintf(w, "keys (fingerprints): %s\n", strings.Join(names, ", "))
	cols := []column[columnCount]{
		{"COLUMN", func(n columnCount) string { return n.Column }},
		{"APP_KEY", func(n columnCount) string { return strconv.Itoa(n.Current) }},
	}
	for i := range st.Keys.Previous {
		cols = append(cols, column[columnCount]{"PREVIOUS " + strconv.Itoa(i+1), func(n columnCount) string { return strconv.Itoa(n.Previous[i]) }})
	}
	cols = append(cols, column[columnCount]{"PLAINTEXT", func(n columnCount) string { return strconv.Itoa(n.Plaintext) }},
		column[columnCount]{"UNREADABLE", func(n columnCount) string { return strconv.Itoa(n.Unreadable) }})
	if err := writeTable(w, cols, st.Columns); err != nil {
		return err
	}
	var plaintext, unreadable int
	previous := make([]int, len(st.Keys.Previous))
	for _, n := range st.Columns {
		for i, p := range n.Previous {
			previous[i] += p
		}
		plaintext += n.Plaintext
		unreadable += n.Unreadable
	}
	if unreadable > 0 {
		fmt.Fprintf(w, "%d value(s) open under no configured key: sealed under a key missing from APP_KEY and APP_PREVIOUS_KEYS here, or damaged; keys rotate cannot re-seal them\n", unreadable)
	}
	if plaintext > 0 {
		fmt.Fprintf(w, "%d value(s) in plaintext, written before encryption at rest: keys rotate seals them\n", plaintext)
	}
	_, err := fmt.Fprintln(w, previousVerdict(st.Keys.Previous, previous))
	return err
}

// previousVerdict is the last line of keys status: which previous keys
// still seal values (by position and fingerprint), or that none does.
func previousVerdict(fingerprints []string, counts []int) string {
	if len(fingerprints) == 0 {
		return "previous keys in use: none configured (APP_PREVIOUS_KEYS is empty)"
	}
	var used []string
	for i, n := range counts {
		if n > 0 {
			used = append(used, fmt.Sprintf("previous key %d (%s) seals %d value(s)", i+1, fingerprints[i], n))
		}
	}
	if len(used) == 0 {
		return "previous keys in use: none; no value is left under a previous key, so APP_PREVIOUS_KEYS can be emptied (step 5 of keys rotate --help)"
	}
	return "previous keys in use: " + strings.Join(used, ", ") + "; run licensor keys rotate, and keep such a key until none is left under it"
}
