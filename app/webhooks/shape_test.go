package webhooks

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/tests/testdb"
)

// placeholders is a run of "?", as an IN list writes them.
var placeholders = regexp.MustCompile(`\?(\s*,\s*\?)*`)

// The dispatcher, the worker and the pruner write through statements of
// one text per shape, whatever their batch's size (see padded): on SQLite
// a text new to GORM's statement cache, prepared inside a transaction on
// the one writing connection, can wait on the cache's lock for as long as
// the query timeout. Batches of 1 to 9 events, for 1 to 3 consumers, are
// dispatched, delivered and pruned; no two statement texts may differ only
// in how many placeholders a list has.
func TestWriterStatementsHaveOneTextPerShape(t *testing.T) {
	db := testdb.New(t, "sqlite")
	r := newRig(t, db, Config{})
	rc := newReceiver(t, nil)
	var mu sync.Mutex
	texts := map[string]map[string]bool{} // normalised → the texts
	record := func(tx *gorm.DB) {
		sql := tx.Statement.SQL.String()
		mu.Lock()
		defer mu.Unlock()
		norm := placeholders.ReplaceAllString(sql, "?…")
		if texts[norm] == nil {
			texts[norm] = map[string]bool{}
		}
		texts[norm][sql] = true
	}
	cbs := db.Gorm.Callback()
	for _, err := range []error{
		cbs.Create().After("gorm:create").Register("shape:create", record),
		cbs.Query().After("gorm:query").Register("shape:query", record),
		cbs.Update().After("gorm:update").Register("shape:update", record),
		cbs.Delete().After("gorm:delete").Register("shape:delete", record),
		cbs.Raw().After("gorm:raw").Register("shape:raw", record),
		cbs.Row().After("gorm:row").Register("shape:row", record),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	consumers := []string{r.consumer("c1"), r.consumer("c2"), r.consumer("c3")}
	for _, c := range consumers {
		r.endpoint(c, rc.url())
	}
	n := 0
	for size := 1; size <= 9; size++ {
		for i := range size {
			n++
			r.license(consumers[i%min(size, 3)], fmt.Sprintf("d%d.test", n))
		}
		r.dispatch()
		r.deliver()
	}
	if _, err := r.hooks.Prune(context.Background(), r.clock.Now().Add(1e12), 4); err != nil {
		t.Fatal(err)
	}
	for norm, raw := range texts {
		if len(raw) > 1 {
			list := make([]string, 0, len(raw))
			for s := range raw {
				list = append(list, s)
			}
			slices.Sort(list)
			t.Errorf("%d texts of one statement (%s):\n%v", len(raw), norm, list)
		}
	}
}
