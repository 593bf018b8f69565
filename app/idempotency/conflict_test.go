package idempotency

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// failFirst is a GORM callback that makes the first statement it sees on
// idempotency_keys fail with err before it reaches the database, as a lost
// lock conflict does; runs counts the statements it saw.
func failFirst(err error) (callback func(*gorm.DB), runs *atomic.Int32) {
	runs = new(atomic.Int32)
	return func(tx *gorm.DB) {
		if tx.Statement.Table == (Record{}).TableName() && runs.Add(1) == 1 {
			_ = tx.AddError(err)
		}
	}, runs
}

// A statement that loses a lock conflict (MySQL's deadlock, its lock wait
// timeout) runs again, and the Store method succeeds as if nothing happened.
func TestStoreRetriesALostLockConflict(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		deadlock, creates := failFirst(&mysqldriver.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"})
		if err := db.Gorm.Callback().Create().Before("gorm:create").Register("test:deadlock_once", deadlock); err != nil {
			t.Fatal(err)
		}
		timeout, updates := failFirst(&mysqldriver.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"})
		if err := db.Gorm.Callback().Update().Before("gorm:update").Register("test:lock_wait_timeout_once", timeout); err != nil {
			t.Fatal(err)
		}
		s := NewStore(db.Gorm, testCipher(t), nil, nil)
		ctx := context.Background()
		now := dbtime.Now()
		lease := now.Add(time.Minute)
		r := &Record{ConsumerID: "c1", Operation: "op", Key: "k", RequestHash: "h", Status: statusProcessing,
			LockedUntil: &lease, Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}

		existing, ok, err := s.reserve(ctx, r)
		if !ok || err != nil || existing != nil {
			t.Fatalf("Reserve after a deadlock = %v, %v, %v; want it reserved", existing, ok, err)
		}
		if n := creates.Load(); n != 2 {
			t.Errorf("the INSERT ran %d times, want 2 (the deadlock, then the retry)", n)
		}
		found, err := s.find(ctx, r.scope())
		if err != nil || found == nil || found.ID != r.ID || found.Status != statusProcessing {
			t.Fatalf("Find after Reserve = %+v, %v; want the reserved record", found, err)
		}

		if err := s.complete(ctx, r, Response{Status: http.StatusCreated, Body: []byte("made")}, now); err != nil {
			t.Fatalf("Complete after a lock wait timeout: %v", err)
		}
		if n := updates.Load(); n != 2 {
			t.Errorf("the UPDATE ran %d times, want 2 (the timeout, then the retry)", n)
		}
		done, err := s.find(ctx, r.scope())
		if err != nil || done == nil || done.Status != StatusCompleted || string(done.ResponseBody) != "made" {
			t.Fatalf("Find after Complete = %+v, %v; want the completed record", done, err)
		}
	})
}
