package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Pruning deletes the events older than the TTL that were dispatched and
// are owed nowhere, with their deliveries and attempts, a batch at a time;
// an old event still pending at an endpoint, or not yet dispatched, is
// kept, and so is a recent one.
func TestPruneDeletesExpiredSettledEvents(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		const ttl = 30 * 24 * time.Hour
		r := newRig(t, db, Config{})
		ok := newReceiver(t, nil)
		down := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusInternalServerError })
		c := r.consumer("ca")
		r.endpoint(c, ok.url())
		revokes := r.endpoint(c, down.url(), events.LicenseRevoked)
		a := r.license(c, "a.test") // created: delivered, then expired
		if err := r.revoke(c, a.ID); err != nil {
			t.Fatal(err) // revoked: delivered, and pending at the revokes endpoint
		}
		r.dispatch()
		r.deliver()
		r.license(c, "b.test") // never dispatched
		r.clock.Advance(ttl + time.Hour)
		r.license(c, "c.test") // recent
		count := func(model any) int64 {
			var n int64
			if err := db.Gorm.Model(model).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}
		if e, d, at := count(&events.Event{}), count(&Delivery{}), count(&Attempt{}); e != 4 || d != 3 || at != 3 {
			t.Fatalf("before: %d events, %d deliveries, %d attempts; want 4, 3, 3", e, d, at)
		}
		n, err := r.hooks.Prune(ctx, r.clock.Now().Add(-ttl), 1)
		if err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want 1 (the created event)", n, err)
		}
		var left []events.Event
		if err := db.Gorm.Order("id").Find(&left).Error; err != nil {
			t.Fatal(err)
		}
		if len(left) != 3 || left[0].Type != events.LicenseRevoked || left[1].Position != nil {
			t.Fatalf("left %+v, want the revoked (pending), the undispatched and the recent", left)
		}
		if d, at := count(&Delivery{}), count(&Attempt{}); d != 2 || at != 2 {
			t.Errorf("after: %d deliveries, %d attempts; want the revoked event's 2 and 2", d, at)
		}
		// Settled at last (failed), the revoked event goes too, with both its deliveries.
		if err := db.Gorm.Model(&Delivery{}).Where("endpoint_id = ?", revokes.ID).Updates(map[string]any{"status": StatusFailed, "next_attempt_at": nil}).Error; err != nil {
			t.Fatal(err)
		}
		if n, err := r.hooks.Prune(ctx, r.clock.Now().Add(-ttl), 1); err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want 1", n, err)
		}
		if e, d, at := count(&events.Event{}), count(&Delivery{}), count(&Attempt{}); e != 2 || d != 0 || at != 0 {
			t.Errorf("at last: %d events, %d deliveries, %d attempts; want 2, 0, 0", e, d, at)
		}
	})
}

// An event dated ahead (written by a replica whose clock was far off) holds
// back no expired event written after it: the pass reads past it.
func TestPruneReadsPastAnEventDatedAhead(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		r := newRig(t, db, Config{})
		c := r.consumer("ca")
		var ids []string
		for _, d := range []string{"a.test", "ahead.test", "c.test"} {
			ids = append(ids, r.license(c, d).ID)
		}
		r.dispatch()
		if err := db.Gorm.Model(&events.Event{}).Where("subject_id = ?", ids[1]).
			Update("created_at", r.clock.Now().AddDate(1, 0, 0)).Error; err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(31 * 24 * time.Hour)
		n, err := r.hooks.Prune(ctx, r.clock.Now().Add(-30*24*time.Hour), 2) // fewer than a batch of young events in a row are read past
		if err != nil || n != 2 {
			t.Fatalf("Prune = %d, %v; want the two expired events", n, err)
		}
		var left []events.Event
		if err := db.Gorm.Find(&left).Error; err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0].SubjectID != ids[1] {
			t.Errorf("left %+v, want the one dated ahead", left)
		}
	})
}
