package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/licensor-api/licensor/tests/testdb"
)

func TestBacklogCountsOwedFailingAndFailed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{RetryBase: time.Minute, RetryFor: time.Hour})
		backlog := func() Backlog {
			t.Helper()
			b, err := r.hooks.Backlog(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// The failing deliveries listed are the ones counted.
			p, err := r.hooks.Deliveries(context.Background(), DeliveryQuery{Failing: true, PerPage: 100})
			if err != nil || p.Total != b.Failing+b.Failed || len(p.Deliveries) != int(p.Total) {
				t.Fatalf("Deliveries(Failing) = %d listed of %d, %v; the backlog counts %+v", len(p.Deliveries), p.Total, err, b)
			}
			return b
		}
		if b := backlog(); b != (Backlog{}) {
			t.Fatalf("empty: %+v", b)
		}
		down := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusInternalServerError })
		up := newReceiver(t, nil)
		c := r.consumer("ca")
		r.endpoint(c, down.url())
		r.endpoint(c, up.url())
		r.license(c, "a.test")
		r.dispatch()
		if b := backlog(); b != (Backlog{Pending: 2}) {
			t.Fatalf("dispatched, not attempted: %+v, want 2 owed, none failing", b)
		}
		r.deliver()
		if b := backlog(); b != (Backlog{Pending: 1, Failing: 1}) {
			t.Fatalf("one delivered, one failed an attempt: %+v", b)
		}
		for range 12 {
			r.clock.Advance(10 * time.Minute)
			r.deliver()
		}
		if b := backlog(); b != (Backlog{Failed: 1}) {
			t.Fatalf("past the retry window: %+v, want one failed", b)
		}
	})
}
