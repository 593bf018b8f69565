package database

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
)

// openSQLite is a migrated SQLite database of the test's own, one
// connection.
func openSQLite(t *testing.T) *gorm.DB {
	t.Helper()
	db, err := OpenMigrated(context.Background(), config.DB{Connection: SQLite, Database: filepath.Join(t.TempDir(), "g.sqlite"), MaxOpenConns: 1, MaxIdleConns: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Close(db) })
	return db
}

// insertConsumer is one write of a request: a consumer row.
func insertConsumer(id string) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error {
		now := time.Now().UTC()
		return tx.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)", id, id, now, now).Error
	}
}

// runBatch holds the writer on a first write until the others are queued,
// so that they share one transaction; it returns each write's error.
func runBatch(t *testing.T, g *GroupCommit, writes []func(*gorm.DB) error) []error {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = g.Do(context.Background(), func(*gorm.DB) error { close(held); <-hold; return nil })
	}()
	<-held
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { errs[i] = g.Do(context.Background(), w) })
	}
	queued := func() bool { return len(g.ops) >= len(writes) } // every write queued behind the held one
	if !testkit.Poll(10*time.Second, queued) {
		t.Fatalf("%d of %d writes queued", len(g.ops), len(writes))
	}
	close(hold)
	wg.Wait()
	return errs
}

func consumerIDs(t *testing.T, db *gorm.DB) map[string]bool {
	t.Helper()
	var ids []string
	if err := db.Raw("SELECT id FROM consumers").Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// Concurrent writes share one commit; one refused by the unique index is
// rolled back alone and gets its error, the others commit.
func TestGroupCommitBatchesAndIsolatesAFailure(t *testing.T) {
	db := openSQLite(t)
	g := NewGroupCommit(db, 0)
	defer g.Close()
	if err := g.Do(context.Background(), insertConsumer("taken")); err != nil {
		t.Fatal(err)
	}
	var writes []func(*gorm.DB) error
	for i := range 20 {
		writes = append(writes, insertConsumer(fmt.Sprintf("c%02d", i)))
	}
	writes = append(writes, insertConsumer("taken")) // a second reservation of a taken key
	errs := runBatch(t, g, writes)
	for i, err := range errs[:20] {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if !errors.Is(errs[20], gorm.ErrDuplicatedKey) {
		t.Errorf("the duplicate: %v, want gorm.ErrDuplicatedKey", errs[20])
	}
	ids := consumerIDs(t, db)
	if len(ids) != 21 {
		t.Errorf("%d rows, want 21 (taken and c00–c19)", len(ids))
	}
	batches, written := g.Stats()
	// the first write, the held one, then one batch of the 21 queued
	if batches != 3 || written != 23 {
		t.Errorf("%d transactions for %d writes, want 3 for 23", batches, written)
	}
}

// No caller hears "done" before the commit holding its write succeeded: a
// batch whose commit fails fails every write in it, and none is kept.
func TestGroupCommitFailedCommitFailsEveryWrite(t *testing.T) {
	db := openSQLite(t)
	g := NewGroupCommit(db, 0)
	defer g.Close()
	writes := []func(*gorm.DB) error{
		insertConsumer("a"),
		func(tx *gorm.DB) error { // a foreign key checked only at COMMIT, and broken
			now := time.Now().UTC()
			if err := tx.Exec("PRAGMA defer_foreign_keys = ON").Error; err != nil {
				return err
			}
			return tx.Exec(`INSERT INTO personal_access_tokens (id, consumer_id, name, abilities, expires_at, created_at, updated_at)
				VALUES ('t', 'nobody', 'n', '[]', ?, ?, ?)`, now, now, now).Error
		},
		insertConsumer("b"),
	}
	for i, err := range runBatch(t, g, writes) {
		if err == nil {
			t.Errorf("write %d succeeded in a batch whose commit failed", i)
		}
	}
	if ids := consumerIDs(t, db); len(ids) != 0 {
		t.Errorf("rows %v kept from a failed commit", ids)
	}
}

func TestGroupCommitClosed(t *testing.T) {
	g := NewGroupCommit(openSQLite(t), 0)
	g.Close()
	if err := g.Do(context.Background(), insertConsumer("x")); !errors.Is(err, ErrGroupClosed) {
		t.Errorf("Do after Close = %v, want ErrGroupClosed", err)
	}
}
