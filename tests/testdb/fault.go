package testdb

import (
	"fmt"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"
)

// Always arms a Fault for every matching statement.
const Always = -1

// Fault fails, while it is armed, the statements of one kind on one table
// that match: a database that fails on command, for the tests of failure
// branches. Inject registers one.
type Fault struct {
	skip atomic.Int64 // matching statements still to let through first
	left atomic.Int64 // matching statements still to fail; Always: every one
	hits atomic.Int64 // statements failed so far
}

// Arm fails the next n matching statements (Always: every one).
func (f *Fault) Arm(n int64) { f.skip.Store(0); f.left.Store(n) }

// ArmAfter lets skip matching statements through, then fails the next n.
func (f *Fault) ArmAfter(skip, n int64) { f.left.Store(n); f.skip.Store(skip) }

// Disarm lets every statement through again.
func (f *Fault) Disarm() { f.left.Store(0) }

// Hits is how many statements the fault failed.
func (f *Fault) Hits() int64 { return f.hits.Load() }

func (f *Fault) take() bool {
	for {
		n := f.left.Load()
		if n == 0 {
			return false
		}
		if s := f.skip.Load(); s > 0 {
			if f.skip.CompareAndSwap(s, s-1) {
				return false
			}
			continue
		}
		if n < 0 || f.left.CompareAndSwap(n, n-1) {
			f.hits.Add(1)
			return true
		}
	}
}

var faultSeq atomic.Int64

// Inject registers on db a Fault, disarmed, for the statements of kind
// ("create", "query", "update", "delete", "row") on table that match (nil:
// all): when it fires, the statement fails with err before it reaches the
// database; of kind "created", after an INSERT ran, as an answer lost once
// the statement committed.
func Inject(t testing.TB, db *gorm.DB, kind, table string, match func(*gorm.DB) bool, err error) *Fault {
	t.Helper()
	f := &Fault{}
	cb := func(tx *gorm.DB) {
		if tx.Statement.Table == table && (match == nil || match(tx)) && f.take() {
			_ = tx.AddError(err)
		}
	}
	name := fmt.Sprintf("testdb:fault_%d", faultSeq.Add(1))
	cbs := db.Callback()
	at, ok := map[string]interface {
		Register(string, func(*gorm.DB)) error
	}{
		"create":  cbs.Create().Before("gorm:create"),
		"created": cbs.Create().After("gorm:create"), // the INSERT ran (committed, outside a transaction); its answer is lost
		"query":   cbs.Query().Before("gorm:query"),
		"update":  cbs.Update().Before("gorm:update"),
		"delete":  cbs.Delete().Before("gorm:delete"),
		"row":     cbs.Row().Before("gorm:row"),
	}[kind]
	if !ok {
		t.Fatalf("testdb.Inject: unknown kind %q", kind)
	}
	if err := at.Register(name, cb); err != nil {
		t.Fatal(err)
	}
	return f
}

// Setting matches an UPDATE whose assignments set column to value.
func Setting(column string, value any) func(*gorm.DB) bool {
	return func(tx *gorm.DB) bool {
		set, ok := tx.Statement.Dest.(map[string]any)
		return ok && set[column] == value
	}
}
