package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/tests/testdb"
)

// feed reads the consumer's whole feed, a page of per at a time, resuming
// after the last event of each page.
func (r *rig) feed(consumerID string, per int, types ...string) []map[string]any {
	r.t.Helper()
	var out []map[string]any
	after := ""
	for {
		p, err := r.events.List(context.Background(), events.Query{ConsumerID: consumerID, After: after, Types: types, Limit: per})
		if err != nil {
			r.t.Fatal(err)
		}
		for _, b := range p.Bodies {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				r.t.Fatal(err)
			}
			out = append(out, m)
		}
		if !p.More {
			return out
		}
		after = p.Events[len(p.Events)-1].ID
	}
}

// An event is in the feed once dispatched, not before; each is owed once to
// every enabled endpoint of its consumer that takes its type, and to no
// other consumer's; the feed reads oldest first and resumes after any event.
func TestDispatchFeedsAndOwes(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		a, b := r.consumer("ca"), r.consumer("cb")
		all := r.endpoint(a, "http://127.0.0.1:1/all")
		revokes := r.endpoint(a, "http://127.0.0.1:1/revokes", events.LicenseRevoked)
		off := r.endpoint(a, "http://127.0.0.1:1/off")
		disabled := false
		if _, err := r.hooks.UpdateEndpoint(context.Background(), a, off.ID, EndpointPatch{Enabled: &disabled}); err != nil {
			t.Fatal(err)
		}
		other := r.endpoint(b, "http://127.0.0.1:1/b")

		lic := r.license(a, "a.test")
		r.license(b, "b.test")
		if got := r.feed(a, 10); len(got) != 0 {
			t.Fatalf("feed before dispatch = %v, want nothing", got)
		}
		if err := r.revoke(a, lic.ID); err != nil {
			t.Fatal(err)
		}
		if n := r.dispatch(); n != 3 {
			t.Fatalf("dispatched %d, want 3", n)
		}
		if n := r.dispatch(); n != 0 {
			t.Fatalf("a second dispatch took %d, want 0", n)
		}
		feed := r.feed(a, 1)
		if len(feed) != 2 || feed[0]["type"] != events.LicenseCreated || feed[1]["type"] != events.LicenseRevoked {
			t.Fatalf("feed = %v, want created then revoked", feed)
		}
		for i, e := range feed {
			l := e["data"].(map[string]any)["license"].(map[string]any)
			if l["id"] != lic.ID || l["license_key"] != lic.LicenseKey || e["sequence"] != float64(i+1) {
				t.Errorf("event %d = %v, want license %s with its key, sequence %d", i, e, lic.ID, i+1)
			}
		}
		if l := feed[1]["data"].(map[string]any)["license"].(map[string]any); l["status"] != licenses.StatusRevoked {
			t.Errorf("the revoked event's license is %v, want it as the revoke left it", l["status"])
		}
		if got := r.feed(a, 10, events.LicenseRevoked); len(got) != 1 {
			t.Errorf("feed of revokes = %v, want one", got)
		}
		owed := map[string]int{}
		var rows []Delivery
		if err := db.Gorm.Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, d := range rows {
			owed[d.EndpointID]++
			if d.Status != StatusPending || d.NextAttemptAt == nil {
				t.Errorf("delivery %+v, want pending and due", d)
			}
		}
		want := map[string]int{all.ID: 2, revokes.ID: 1, other.ID: 1}
		if fmt.Sprint(owed) != fmt.Sprint(want) {
			t.Errorf("owed per endpoint = %v, want %v (none to the disabled one)", owed, want)
		}
		if _, err := r.events.List(context.Background(), events.Query{ConsumerID: b, After: feed[0]["id"].(string), Limit: 10}); !errors.Is(err, events.ErrNotFound) {
			t.Errorf("another consumer's event as after = %v, want ErrNotFound", err)
		}
	})
}

// Dispatchers racing (two replicas) number every event once, with no gap
// and no position twice, and owe each event once per endpoint.
func TestConcurrentDispatchersNumberEachEventOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		a := r.consumer("ca")
		ep := r.endpoint(a, "http://127.0.0.1:1/all")
		const n = 60
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := range n / 3 {
					r.license(a, fmt.Sprintf("w%d-%d.test", w, i))
				}
			})
			wg.Go(func() {
				for range 10 {
					if _, err := r.hooks.Dispatch(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		r.dispatch()
		var positions []uint64
		if err := db.Gorm.Model(&events.Event{}).Order("position").Pluck("position", &positions).Error; err != nil {
			t.Fatal(err)
		}
		if len(positions) != n {
			t.Fatalf("%d events numbered, want %d", len(positions), n)
		}
		for i, p := range positions {
			if p != uint64(i+1) {
				t.Fatalf("positions = %v, want 1..%d", positions, n)
			}
		}
		var owed int64
		if err := db.Gorm.Model(&Delivery{}).Where("endpoint_id = ?", ep.ID).Count(&owed).Error; err != nil {
			t.Fatal(err)
		}
		if owed != n {
			t.Errorf("%d deliveries, want %d", owed, n)
		}
		if got := r.feed(a, 7); len(got) != n {
			t.Errorf("the feed read in pages has %d events, want %d", len(got), n)
		}
	})
}
