package webhooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/fault"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// plan shares a worker's free senders: consumers in turn, endpoints in
// rotation, no endpoint past its cap, no consumer past its share.
func TestPlanSharesSendersFairly(t *testing.T) {
	hostile := func(n int) []candidate {
		var cs []candidate
		for i := range n {
			cs = append(cs, candidate{EndpointID: fmt.Sprintf("h%d", i), ConsumerID: "hostile"})
		}
		return cs
	}
	tests := []struct {
		name        string
		cands       []candidate
		inFlight    map[string]int
		perEndpoint int
		slots       int
		held        map[string]int
		want        []pick
	}{
		{name: "a consumer alone takes half the senders, keeping room for a newcomer",
			cands: hostile(16), perEndpoint: 1, slots: 16,
			want: []pick{{"h0", 1}, {"h1", 1}, {"h2", 1}, {"h3", 1}, {"h4", 1}, {"h5", 1}, {"h6", 1}, {"h7", 1}}},
		{name: "a newcomer is served while a consumer holds more than its share",
			cands: append(hostile(16), candidate{"v0", "victim"}), perEndpoint: 1, slots: 8, held: map[string]int{"hostile": 8},
			want: []pick{{"v0", 1}}},
		{name: "consumers take turns, endpoints in rotation",
			cands:       []candidate{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}},
			perEndpoint: 1, slots: 16,
			want: []pick{{"a1", 1}, {"b1", 1}, {"a2", 1}}},
		{name: "an endpoint at its cap across workers is skipped",
			cands: []candidate{{"a1", "a"}, {"b1", "b"}}, inFlight: map[string]int{"a1": 1}, perEndpoint: 1, slots: 16,
			want: []pick{{"b1", 1}}},
		{name: "a higher cap lets an endpoint take more",
			cands: []candidate{{"a1", "a"}}, inFlight: map[string]int{"a1": 1}, perEndpoint: 3, slots: 16,
			want: []pick{{"a1", 2}}},
		{name: "no more than the free slots",
			cands: []candidate{{"a1", "a"}, {"b1", "b"}, {"c1", "c"}}, perEndpoint: 1, slots: 2,
			want: []pick{{"a1", 1}, {"b1", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan(tt.cands, tt.inFlight, tt.perEndpoint, tt.slots, senders, tt.held)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan = %v, want %v", got, tt.want)
			}
		})
	}
}

// A consumer with 16 endpoints owing 10 deliveries each, all older than
// another consumer's one delivery: one claim takes the other consumer's
// too, and no more than one delivery of any endpoint.
func TestClaimServesANewcomerBesideABacklog(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		hostile, victim := r.consumer("hostile"), r.consumer("victim")
		for i := range MaxEndpoints {
			r.endpoint(hostile, fmt.Sprintf("http://127.0.0.1:1/h%d", i))
		}
		for i := range 10 {
			r.license(hostile, fmt.Sprintf("h%d.test", i))
		}
		r.dispatch()
		r.clock.Advance(time.Second)
		mine := r.endpoint(victim, "http://127.0.0.1:1/v")
		r.license(victim, "v.test")
		r.dispatch()

		held, err := r.hooks.claim(context.Background(), senders, nil)
		if err != nil {
			t.Fatal(err)
		}
		perEndpoint := map[string]int{}
		for _, c := range held {
			perEndpoint[c.EndpointID]++
		}
		if perEndpoint[mine.ID] != 1 {
			t.Errorf("the claim took %d of the newcomer's deliveries, want its one (claimed %d in all)", perEndpoint[mine.ID], len(held))
		}
		for id, n := range perEndpoint {
			if n > 1 {
				t.Errorf("endpoint %s: %d deliveries claimed at once, want at most 1", id, n)
			}
		}
		if hostiles := len(held) - perEndpoint[mine.ID]; hostiles > share(senders, 2) {
			t.Errorf("the backlog's consumer got %d senders, want at most its share %d", hostiles, share(senders, 2))
		}
	})
}

// Two workers (replicas) claiming at the same moment on one database never
// have more attempts in flight to one endpoint than
// WEBHOOK_ENDPOINT_CONCURRENCY, round after round.
func TestEndpointConcurrencyHoldsAcrossWorkers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		for _, limit := range []int{1, 2} {
			t.Run(fmt.Sprint(limit), func(t *testing.T) {
				r := newRig(t, db, Config{EndpointConcurrency: limit})
				workers := []*Service{r.hooks, New(r.cfg)}
				for round := range 10 {
					c := r.consumer(fmt.Sprintf("c%d-%d", limit, round))
					ep := r.endpoint(c, "http://127.0.0.1:1/h")
					for i := range 5 {
						r.license(c, fmt.Sprintf("c%d-%d-%d.test", limit, round, i))
					}
					r.dispatch()
					start := make(chan struct{})
					got := make([][]claimed, len(workers))
					var wg sync.WaitGroup
					for i, w := range workers {
						wg.Go(func() {
							<-start
							held, err := w.claim(context.Background(), senders, nil)
							if err != nil {
								t.Error(err)
							}
							got[i] = held
						})
					}
					close(start)
					wg.Wait()
					n := 0
					for _, held := range got {
						for _, c := range held {
							if c.EndpointID == ep.ID {
								n++
							}
						}
					}
					if n != limit {
						t.Fatalf("round %d: the two workers claimed %d of the endpoint's 5 due deliveries at once, want %d", round, n, limit)
					}
					// Settled, so that the next round's consumer is the only
					// one with work (and so has a share of more than one).
					err := db.Gorm.Model(&Delivery{}).Where("status = ?", StatusPending).
						Updates(map[string]any{"status": StatusDelivered, "claim": nil, "next_attempt_at": nil}).Error
					if err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	})
}

// Endpoints that cannot take another attempt (each at its cap) never fill
// the claim's window: with 4 consumers' 64 endpoints all busy, claimed for
// before it, an endpoint served a moment ago still has its due delivery
// claimed.
func TestBusyEndpointsDoNotHideOthers(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		ctx := context.Background()
		for k := range 4 {
			c := r.consumer(fmt.Sprintf("busy%d", k))
			for i := range MaxEndpoints {
				r.endpoint(c, fmt.Sprintf("http://127.0.0.1:1/b%d-%d", k, i))
			}
			r.license(c, fmt.Sprintf("busy%d-a.test", k))
			r.license(c, fmt.Sprintf("busy%d-b.test", k))
		}
		victim := r.consumer("victim")
		mine := r.endpoint(victim, "http://127.0.0.1:1/v")
		r.license(victim, "v.test")
		r.dispatch()
		// Every busy endpoint has one attempt in flight (its first
		// delivery, under a live claim) and one more due; the victim's was
		// claimed for a moment ago, theirs never.
		lease := r.clock.Now().Add(time.Minute)
		err := db.Gorm.Exec("UPDATE webhook_deliveries SET claim = ?, next_attempt_at = ? WHERE endpoint_id <> ? AND event_id IN "+
			"(SELECT MIN(event_id) FROM webhook_deliveries GROUP BY consumer_id)", "01OTHERWORKER0000000000000", lease, mine.ID).Error
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Gorm.Model(&Endpoint{}).Where("id = ?", mine.ID).UpdateColumn("last_claimed_at", r.clock.Now()).Error; err != nil {
			t.Fatal(err)
		}
		held, err := r.hooks.claim(ctx, senders, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != 1 || held[0].EndpointID != mine.ID {
			t.Errorf("claimed %d deliveries %v, want the victim's one alone (every other endpoint is at its cap)", len(held), held)
		}
	})
}

// A new url, or enabling a disabled endpoint, closes its breaker; enabling
// an enabled one does not.
func TestBreakerClosesOnANewURL(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		r := newRig(t, db, Config{})
		c := r.consumer("ca")
		ep := r.endpoint(c, "http://127.0.0.1:1/h")
		pause := func() {
			err := db.Gorm.Model(&Endpoint{}).Where("id = ?", ep.ID).
				UpdateColumns(map[string]any{"consecutive_timeouts": 5, "paused_until": r.clock.Now().Add(time.Hour)}).Error
			if err != nil {
				t.Fatal(err)
			}
		}
		on, off, url := true, false, "http://127.0.0.1:1/new"
		pause()
		if _, err := r.hooks.UpdateEndpoint(ctx, c, ep.ID, EndpointPatch{Enabled: &on}); err != nil {
			t.Fatal(err)
		}
		if got := r.reload(ep); got.PausedUntil == nil || got.ConsecutiveTimeouts != 5 {
			t.Errorf("enabling an enabled endpoint closed its breaker (%d, %v)", got.ConsecutiveTimeouts, got.PausedUntil)
		}
		if _, err := r.hooks.UpdateEndpoint(ctx, c, ep.ID, EndpointPatch{URL: &url}); err != nil {
			t.Fatal(err)
		}
		if got := r.reload(ep); got.PausedUntil != nil || got.ConsecutiveTimeouts != 0 {
			t.Errorf("a new url left the breaker at %d, %v; want it closed", got.ConsecutiveTimeouts, got.PausedUntil)
		}
		pause()
		if _, err := r.hooks.UpdateEndpoint(ctx, c, ep.ID, EndpointPatch{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.hooks.UpdateEndpoint(ctx, c, ep.ID, EndpointPatch{Enabled: &on}); err != nil {
			t.Fatal(err)
		}
		if got := r.reload(ep); got.PausedUntil != nil || got.ConsecutiveTimeouts != 0 {
			t.Errorf("enabling a disabled endpoint left the breaker at %d, %v; want it closed", got.ConsecutiveTimeouts, got.PausedUntil)
		}
	})
}

// An endpoint whose attempts keep timing out is paused as a whole after
// breakerAfter of them in a row: its due deliveries wait, another
// endpoint's go on; after the pause one trial attempt goes, and an answer
// closes the breaker.
func TestBreakerPausesAnEndpointThatKeepsTimingOut(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		var answering atomic.Bool
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			_, _ = io.Copy(io.Discard, req.Body) // read: the server then sees the sender hang up
			if !answering.Load() {
				<-req.Context().Done() // no answer before the sender gives up
			}
		}))
		t.Cleanup(slow.Close)
		r := newRig(t, db, Config{Timeout: time.Second, RetryBase: time.Minute}) // long enough for the good endpoint's answer on a loaded machine
		c := r.consumer("ca")
		bad := r.endpoint(c, slow.URL)
		good := newReceiver(t, nil)
		r.endpoint(c, good.url())
		for i := range breakerAfter + 2 {
			r.license(c, fmt.Sprintf("s%d.test", i))
		}
		r.dispatch()
		for i := range breakerAfter {
			r.deliverOnce()
			if got := r.reload(bad); got.ConsecutiveTimeouts != i+1 {
				t.Fatalf("after %d timeouts the endpoint counts %d", i+1, got.ConsecutiveTimeouts)
			}
		}
		paused := r.reload(bad)
		if paused.PausedUntil == nil || !paused.PausedUntil.Equal(r.clock.Now().Add(time.Minute)) {
			t.Fatalf("after %d timeouts in a row paused until %v, want %v", breakerAfter, paused.PausedUntil, r.clock.Now().Add(time.Minute))
		}
		r.deliver() // the good endpoint's, all of them; none of the paused one's
		if n := len(good.delivered()); n != breakerAfter+2 {
			t.Errorf("the other endpoint got %d events while one was paused, want %d", n, breakerAfter+2)
		}
		attempts := func() int {
			n := 0
			for _, d := range r.deliveries(bad.ID) {
				n += d.Attempts
			}
			return n
		}
		if n := attempts(); n != breakerAfter {
			t.Fatalf("the paused endpoint had %d attempts, want %d", n, breakerAfter)
		}

		// The pause ends: one trial, which times out too, and the pause doubles.
		r.clock.Advance(time.Minute)
		if n := r.deliverOnce(); n != 1 {
			t.Fatalf("after the pause %d deliveries were claimed, want the one trial", n)
		}
		if got := r.reload(bad); got.PausedUntil == nil || !got.PausedUntil.Equal(r.clock.Now().Add(2*time.Minute)) {
			t.Fatalf("a failed trial paused it until %v, want %v", got.PausedUntil, r.clock.Now().Add(2*time.Minute))
		}

		// The endpoint answers again: the trial closes the breaker.
		r.clock.Advance(2 * time.Minute)
		answering.Store(true)
		if n := r.deliverOnce(); n != 1 {
			t.Fatalf("after the second pause %d deliveries were claimed, want the one trial", n)
		}
		if got := r.reload(bad); got.ConsecutiveTimeouts != 0 || got.PausedUntil != nil {
			t.Errorf("an answer left the breaker at %d timeouts, paused until %v; want it closed", got.ConsecutiveTimeouts, got.PausedUntil)
		}
	})
}

// A consumer's own retry of a delivery goes through once a minute per
// endpoint, and never past the endpoint's breaker; an operator's retry is
// not limited.
func TestConsumerRetryOncePerMinuteAndNeverPastTheBreaker(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		r := newRig(t, db, Config{})
		c := r.consumer("ca")
		ep := r.endpoint(c, "http://127.0.0.1:1/h")
		r.license(c, "a.test")
		r.license(c, "b.test")
		r.dispatch()
		ds := r.deliveries(ep.ID)
		by := audit.ByToken(c, "01TOKEN000000000000000000A", "")
		if _, err := r.hooks.RetryDelivery(ctx, by, c, ep.ID, ds[0].ID); err != nil {
			t.Fatalf("first retry: %v", err)
		}
		r.clock.Advance(59 * time.Second)
		_, err := r.hooks.RetryDelivery(ctx, by, c, ep.ID, ds[1].ID)
		var soon *fault.Error
		if !errors.As(err, &soon) || soon.Code != CodeRetryTooSoon || soon.RetryAfter != time.Second {
			t.Fatalf("a second retry 59s later = %v, want %s after 1s", err, CodeRetryTooSoon)
		}
		if _, err := r.hooks.RetryDelivery(ctx, audit.Console(), "", "", ds[1].ID); err != nil {
			t.Errorf("an operator's retry = %v, want it let through", err)
		}
		r.clock.Advance(time.Second)
		if _, err := r.hooks.RetryDelivery(ctx, by, c, ep.ID, ds[1].ID); err != nil {
			t.Errorf("a retry a minute later = %v, want it let through", err)
		}

		// Paused: the retry makes the delivery due, and it waits for the pause.
		until := r.clock.Now().Add(time.Hour)
		if err := db.Gorm.Model(&Endpoint{}).Where("id = ?", ep.ID).UpdateColumn("paused_until", until).Error; err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(time.Minute)
		if _, err := r.hooks.RetryDelivery(ctx, by, c, ep.ID, ds[0].ID); err != nil {
			t.Fatal(err)
		}
		if n := r.deliverOnce(); n != 0 {
			t.Errorf("a retried delivery of a paused endpoint was claimed (%d): the retry bypassed the breaker", n)
		}
		r.clock.Set(until)
		if n := r.deliverOnce(); n != 1 {
			t.Errorf("after the pause %d deliveries were claimed, want 1", n)
		}
	})
}

// Dispatch never waits for deliveries: while every sender waits on
// endpoints that do not answer, new events are still numbered for the feed
// within a few poll intervals.
func TestDispatchRunsWhileEverySenderWaits(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			select {
			case <-req.Context().Done():
			case <-release:
			}
		}))
		r := newRig(t, db, Config{Timeout: time.Minute, Interval: 10 * time.Millisecond})
		c := r.consumer("ca")
		for i := range MaxEndpoints {
			r.endpoint(c, fmt.Sprintf("%s/h%d", slow.URL, i))
		}
		r.license(c, "first.test")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.hooks.Run(ctx) }()
		t.Cleanup(func() { // the attempts answered, so that Run returns at once
			close(release)
			cancel()
			<-done
			slow.Close()
		})
		testkit.Eventually(t, 10*time.Second, func() bool { return r.inFlight() > 0 }, "no delivery was sent")

		lic := r.license(c, "second.test")
		testkit.Eventually(t, 5*time.Second, func() bool {
			var n int64
			err := db.Gorm.Table("consumer_events").Where("subject_id = ? AND position IS NOT NULL", lic.ID).Count(&n).Error
			return err == nil && n == 1
		}, "the second license's event was not dispatched while the senders waited")
	})
}

// deliverOnce runs one round of the worker; it returns how many deliveries
// it claimed.
func (r *rig) deliverOnce() int {
	r.t.Helper()
	n, err := r.hooks.DeliverDue(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// inFlight counts the deliveries under a claim.
func (r *rig) inFlight() int64 {
	var n int64
	if err := r.db.Gorm.Model(&Delivery{}).Where("claim IS NOT NULL").Count(&n).Error; err != nil {
		r.t.Fatal(err)
	}
	return n
}
