package webhooks

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// An endpoint deleted while the dispatcher owes it an event (MySQL: the
// delete commits after the dispatcher's snapshot, before its deliveries are
// written) is owed nothing: the delete waits for the dispatcher and takes
// the deliveries with it, rather than leave deliveries to an endpoint that
// is gone. (SQLite runs one writer at a time: the race cannot happen.)
func TestEndpointDeletedMidDispatchIsOwedNothing(t *testing.T) {
	db := testdb.New(t, "mysql")
	r := newRig(t, db, Config{})
	a := r.consumer("ca")
	ep := r.endpoint(a, "http://127.0.0.1:1/all")
	r.license(a, "a.test")

	reached, release := make(chan struct{}), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // a test failed mid-way still lets the dispatcher finish
	var once atomic.Bool
	if err := db.Gorm.Callback().Create().Before("gorm:create").Register("test:hold_dispatch", func(tx *gorm.DB) {
		if tx.Statement.Table == "webhook_deliveries" && once.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
	}); err != nil {
		t.Fatal(err)
	}
	dispatched := make(chan error, 1)
	go func() { _, err := r.hooks.Dispatch(context.Background()); dispatched <- err }()
	<-reached // the dispatcher has read the endpoint and is about to owe it the event
	deleted := make(chan error, 1)
	go func() { deleted <- r.hooks.DeleteEndpoint(context.Background(), a, ep.ID) }()
	// The delete either returns (it did not wait for the dispatcher) or
	// waits on its lock: whichever comes first.
	var deleteDone bool
	testkit.Eventually(t, 10*time.Second, func() bool {
		select {
		case err := <-deleted:
			if err != nil {
				t.Errorf("delete: %v", err)
			}
			deleteDone = true
			return true
		default:
		}
		var waiting int64
		db.Gorm.Raw("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE info LIKE 'DELETE FROM `webhook_endpoints`%' AND state = 'Updating'").Scan(&waiting)
		return waiting > 0
	}, "the delete neither returned nor waited")
	releaseOnce()
	must(t, <-dispatched)
	if !deleteDone {
		if err := <-deleted; err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	var owed, endpoints int64
	db.Gorm.Model(&Delivery{}).Where("endpoint_id = ?", ep.ID).Count(&owed)
	db.Gorm.Model(&Endpoint{}).Where("id = ?", ep.ID).Count(&endpoints)
	if endpoints != 0 || owed != 0 {
		t.Errorf("after the delete: %d endpoint rows, %d deliveries owed to it; want none", endpoints, owed)
	}
}

// Creates racing for one consumer's last endpoints (real goroutines, both
// databases) never take it past MaxEndpoints: each counts after the other.
func TestConcurrentCreatesKeepTheEndpointLimit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		a := r.consumer("ca")
		var wg sync.WaitGroup
		var made, refused atomic.Int64
		for range MaxEndpoints + 8 {
			wg.Go(func() {
				_, _, err := r.hooks.CreateEndpoint(context.Background(), a, EndpointInput{URL: "http://127.0.0.1:1/h"})
				switch {
				case err == nil:
					made.Add(1)
				case errors.Is(err, ErrTooManyEndpoints):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var n int64
		db.Gorm.Model(&Endpoint{}).Where("consumer_id = ?", a).Count(&n)
		if n != MaxEndpoints || made.Load() != MaxEndpoints || refused.Load() != 8 {
			t.Errorf("%d endpoints (%d made, %d refused), want %d and 8 refused", n, made.Load(), refused.Load(), MaxEndpoints)
		}
	})
}

// A delivery whose worker died (its claim's lease lapsed) and whose
// endpoint was disabled meanwhile is parked without the dead claim: a retry
// then goes, rather than answer that a worker is sending it.
func TestParkedDeliveryKeepsNoDeadClaim(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		a := r.consumer("ca")
		ep := r.endpoint(a, "http://127.0.0.1:1/h")
		r.license(a, "a.test")
		r.dispatch()
		lapsed := r.clock.Now().Add(-time.Second)
		must(t, db.Gorm.Model(&Delivery{}).Where("endpoint_id = ?", ep.ID).
			Updates(map[string]any{"claim": "01DEADWORKER00000000000000", "next_attempt_at": lapsed}).Error)
		off := false
		r.update(a, ep.ID, EndpointPatch{Enabled: &off})
		r.deliver() // finds it due, of a disabled endpoint: parks it
		var d Delivery
		must(t, db.Gorm.Where("endpoint_id = ?", ep.ID).Take(&d).Error)
		if d.NextAttemptAt != nil || d.Claim != nil {
			t.Fatalf("parked delivery: next attempt %v, claim %v; want neither", d.NextAttemptAt, d.Claim)
		}
		if _, err := r.hooks.RetryDelivery(context.Background(), audit.Console(), "", "", d.ID); err != nil {
			t.Errorf("retry of the parked delivery = %v, want it retried", err)
		}
	})
}
