package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/client"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A receiver that answers 500 three times then 200 gets the event exactly
// four times, each attempt after its backoff, and never again once it is
// delivered; each attempt is recorded and counted.
func TestRetriedUntilDeliveredThenNeverAgain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		var tl tally
		r := newRig(t, db, Config{RetryBase: time.Minute, Observe: tl.observe})
		rc := newReceiver(t, failing(http.StatusInternalServerError, 3))
		c := r.consumer("ca")
		ep := r.endpoint(c, rc.url())
		r.license(c, "a.test")
		r.dispatch()
		start := r.clock.Now()
		if n := r.deliver(); n != 1 || rc.count() != 1 {
			t.Fatalf("first round: claimed %d, receiver got %d; want 1 and 1", n, rc.count())
		}
		if n := r.deliver(); n != 0 {
			t.Fatalf("a retry was due before its backoff: claimed %d", n)
		}
		for range 48 { // two days, in half hours: past every backoff many times over
			r.clock.Advance(30 * time.Minute)
			r.deliver()
		}
		if got := rc.count(); got != 4 {
			t.Fatalf("the receiver got the event %d times, want 4 (3 failures, then the delivery)", got)
		}
		ds := r.deliveries(ep.ID)
		if len(ds) != 1 {
			t.Fatalf("%d deliveries, want 1", len(ds))
		}
		d := ds[0]
		if d.Status != StatusDelivered || d.Attempts != 4 || d.LastStatus == nil || *d.LastStatus != 200 ||
			d.NextAttemptAt != nil || d.Claim != nil || d.DeliveredAt == nil {
			t.Errorf("delivery = %+v, want delivered after 4 attempts, last 200, nothing due, no claim", d)
		}
		as := r.attempts(d.ID)
		if len(as) != 4 {
			t.Fatalf("%d attempts recorded, want 4", len(as))
		}
		for i, a := range as {
			want := 500
			if i == 3 {
				want = 200
			}
			if a.ResponseStatus == nil || *a.ResponseStatus != want || (want == 500) != (a.Error != nil) {
				t.Errorf("attempt %d = status %v error %v, want %d", i, a.ResponseStatus, a.Error, want)
			}
			if a.Error != nil && *a.Error != FailureHTTPStatus {
				t.Errorf("attempt %d error %q, want %q", i, *a.Error, FailureHTTPStatus)
			}
		}
		// Each wait at least RetryBase·2^(n-1): the attempts are 1, 2, 4 minutes apart at least
		// (rounded up to the half hour the clock moves by here).
		if !as[1].AttemptedAt.After(start) || !as[3].AttemptedAt.After(as[2].AttemptedAt) {
			t.Errorf("attempts at %v, want each later than the last", []time.Time{as[0].AttemptedAt, as[1].AttemptedAt, as[2].AttemptedAt, as[3].AttemptedAt})
		}
		if tl.of(OutcomeRetried) != 3 || tl.of(OutcomeDelivered) != 1 || tl.of(OutcomeFailed) != 0 {
			t.Errorf("outcomes = %v, want retried 3, delivered 1", tl.m)
		}
		if e := r.reload(ep); e.FailingSince != nil || !e.Enabled {
			t.Errorf("endpoint after a delivery: failing since %v, enabled %v; want no streak, enabled", e.FailingSince, e.Enabled)
		}
	})
}

// The wait after the n-th failure is RetryBase·2^(n-1) and up to a quarter
// more, never more than maxBackoff.
func TestBackoffDoublesWithJitterAndACap(t *testing.T) {
	s := &Service{cfg: Config{RetryBase: 30 * time.Second}}
	for n, base := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 10: 512 * 30 * time.Second} {
		for range 50 {
			if d := s.backoff(n); d < base || d > base+base/4 {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, base, base+base/4)
			}
		}
	}
	for _, n := range []int{12, 13, 40, 1000} {
		if d := s.backoff(n); d != maxBackoff {
			t.Errorf("backoff(%d) = %v, want the cap %v", n, d, maxBackoff)
		}
	}
}

// A receiver down for a day (the clock moved on by ten minutes at a time,
// the worker running at each step) gets every event once it is back, each
// delivered once.
func TestReceiverDownForADayGetsEveryEventAfterwards(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{RetryBase: 30 * time.Second})
		var mu sync.Mutex
		down := true
		rc := newReceiver(t, func(int, http.ResponseWriter) int {
			mu.Lock()
			defer mu.Unlock()
			if down {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		c := r.consumer("ca")
		ep := r.endpoint(c, rc.url())
		for i := range 3 {
			r.license(c, fmt.Sprintf("s%d.test", i))
		}
		lic := r.license(c, "gone.test")
		if err := r.revoke(c, lic.ID); err != nil {
			t.Fatal(err)
		}
		r.dispatch()
		for step := time.Duration(0); step < 24*time.Hour; step += 10 * time.Minute {
			r.deliver()
			r.clock.Advance(10 * time.Minute)
		}
		if rc.count() == 0 || len(rc.delivered()) != 0 {
			t.Fatalf("while down: %d requests, %v delivered; want tries and none delivered", rc.count(), rc.delivered())
		}
		mu.Lock()
		down = false
		mu.Unlock()
		for step := time.Duration(0); step <= maxBackoff+time.Hour; step += 10 * time.Minute {
			r.deliver()
			r.clock.Advance(10 * time.Minute)
		}
		got := rc.delivered()
		ds := r.deliveries(ep.ID)
		if len(ds) != 5 || len(got) != 5 {
			t.Fatalf("%d deliveries, %d events delivered, want 5 and 5: %v", len(ds), len(got), got)
		}
		for _, d := range ds {
			if d.Status != StatusDelivered {
				t.Errorf("delivery %s is %s after %d attempts, want delivered", d.ID, d.Status, d.Attempts)
			}
		}
		for id, n := range got {
			if n != 1 {
				t.Errorf("event %s delivered %d times, want once", id, n)
			}
		}
	})
}

// A delivery that fails for its whole retry window is failed and counted;
// its endpoint, having failed every delivery for RetryFor (and not before),
// is disabled, and the consumer reads why from its feed: a
// webhook_endpoint.disabled event, delivered to its other endpoint that
// takes it.
func TestRetryWindowEndsFailedAndTheEndpointIsDisabled(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		var tl tally
		const window = 6 * time.Hour
		r := newRig(t, db, Config{RetryBase: time.Minute, RetryFor: window, Observe: tl.observe})
		down := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusInternalServerError })
		watcher := newReceiver(t, nil)
		c := r.consumer("ca")
		ep := r.endpoint(c, down.url())
		r.endpoint(c, watcher.url(), events.EndpointDisabled)
		r.license(c, "a.test")
		r.dispatch()
		first := r.clock.Now()
		for step := time.Duration(0); step < window+2*time.Hour; step += 10 * time.Minute {
			r.deliver()
			if now := r.clock.Now(); now.Before(first.Add(window)) && !r.reload(ep).Enabled {
				t.Fatalf("the endpoint was disabled at %v, before failing for %v", now.Sub(first), window)
			}
			r.clock.Advance(10 * time.Minute)
			r.dispatch()
		}
		ds := r.deliveries(ep.ID)
		if len(ds) != 1 || ds[0].Status != StatusFailed || ds[0].NextAttemptAt != nil || ds[0].Claim != nil {
			t.Fatalf("deliveries = %+v, want one, failed, nothing due", ds)
		}
		if tl.of(OutcomeFailed) != 1 || tl.of(OutcomeRetried) != ds[0].Attempts-1 {
			t.Errorf("outcomes = %v, want failed 1 and retried %d", tl.m, ds[0].Attempts-1)
		}
		e := r.reload(ep)
		want := "every delivery failed for 6h0m0s"
		if e.Enabled || e.DisabledAt == nil || e.DisabledReason == nil || *e.DisabledReason != want || e.EventSequence != 1 {
			t.Fatalf("endpoint = %+v, want disabled: %q, its event sequence 1", e, want)
		}
		feed := r.feed(c, 10, events.EndpointDisabled)
		if len(feed) != 1 {
			t.Fatalf("feed of disabled = %v, want one event", feed)
		}
		data := feed[0]["data"].(map[string]any)["webhook_endpoint"].(map[string]any)
		if data["id"] != ep.ID || data["enabled"] != false || data["disabled_reason"] != want || feed[0]["sequence"] != float64(1) {
			t.Errorf("event = %v, want the endpoint as disabled, sequence 1", feed[0])
		}
		if _, ok := data["secret"]; ok {
			t.Errorf("the event carries the endpoint's secret: %v", data)
		}
		if got := watcher.delivered(); len(got) != 1 || got[feed[0]["id"].(string)] != 1 {
			t.Errorf("the watching endpoint got %v, want the disabled event once", got)
		}
		before := down.count()
		r.clock.Advance(24 * time.Hour)
		r.deliver()
		if down.count() != before {
			t.Errorf("a disabled endpoint was sent %d more", down.count()-before)
		}
	})
}

// What is sent: the event's body, the same bytes on every attempt and in
// the feed, signed under the endpoint's secret so that client.VerifyWebhook
// takes it and refuses a forgery; the event's and delivery's ids, the
// user agent, JSON.
func TestDeliveriesAreSignedAndVerify(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{RetryBase: time.Second, UserAgent: "licensor/test"})
		r.clock.Set(time.Now()) // VerifyWebhook checks the time against the real clock
		rc := newReceiver(t, failing(http.StatusInternalServerError, 1))
		c := r.consumer("ca")
		ep, secret, err := r.hooks.CreateEndpoint(context.Background(), c, EndpointInput{URL: rc.url()})
		if err != nil {
			t.Fatal(err)
		}
		r.license(c, "a.test")
		r.dispatch()
		r.deliver()
		r.clock.Advance(2 * time.Second)
		r.deliver()
		hits := rc.got()
		if len(hits) != 2 {
			t.Fatalf("%d requests, want 2 (a 500 then the delivery)", len(hits))
		}
		p, err := r.events.List(context.Background(), events.Query{ConsumerID: c, Limit: 10})
		if err != nil || len(p.Bodies) != 1 {
			t.Fatalf("feed: %v, %v", p.Bodies, err)
		}
		d := r.deliveries(ep.ID)[0]
		for i, h := range hits {
			sig := h.header.Get(client.SignatureHeader)
			if err := client.VerifyWebhook(secret, sig, h.body, time.Minute); err != nil {
				t.Errorf("attempt %d: VerifyWebhook under the endpoint's secret: %v", i, err)
			}
			if !bytes.Equal(h.body, p.Bodies[0]) {
				t.Errorf("attempt %d body %s, want the feed's %s", i, h.body, p.Bodies[0])
			}
			if h.header.Get(client.EventIDHeader) != p.Events[0].ID || h.eventID() != p.Events[0].ID {
				t.Errorf("attempt %d event id %q (body %q), want %q", i, h.header.Get(client.EventIDHeader), h.eventID(), p.Events[0].ID)
			}
			if h.header.Get(DeliveryIDHeader) != d.ID || h.header.Get("User-Agent") != "licensor/test" ||
				h.header.Get("Content-Type") != "application/json" {
				t.Errorf("attempt %d headers %v, want delivery %s, licensor/test, application/json", i, h.header, d.ID)
			}
			forged := strings.Replace(sig, "v1=", "v1=0", 1)[:len(sig)]
			if err := client.VerifyWebhook(secret, forged, h.body, time.Minute); !errors.Is(err, client.ErrBadSignature) {
				t.Errorf("a forged signature: %v, want ErrBadSignature", err)
			}
			if err := client.VerifyWebhook(SecretPrefix+strings.Repeat("0", 64), sig, h.body, time.Minute); !errors.Is(err, client.ErrBadSignature) {
				t.Errorf("another secret: %v, want ErrBadSignature", err)
			}
			tampered := bytes.Replace(h.body, []byte(`"active"`), []byte(`"revoked"`), 1)
			if err := client.VerifyWebhook(secret, sig, tampered, time.Minute); !errors.Is(err, client.ErrBadSignature) {
				t.Errorf("a changed body: %v, want ErrBadSignature", err)
			}
		}
		if bytes.Contains(h0(hits).body, []byte(secret)) || strings.Contains(fmt.Sprint(h0(hits).header), secret) {
			t.Error("the secret itself was sent")
		}
		if SignatureHeader != client.SignatureHeader || EventIDHeader != client.EventIDHeader {
			t.Errorf("headers %s, %s differ from the client's %s, %s", SignatureHeader, EventIDHeader, client.SignatureHeader, client.EventIDHeader)
		}
	})
}

func h0(hits []hit) hit { return hits[0] }

// The address rule holds at delivery time (WEBHOOK_ALLOW_PRIVATE=false),
// whatever the endpoint's URL was when it was registered: a loopback, a
// private, a link-local (the cloud's metadata service) and an IPv6
// loopback address, and names resolving to them, are never connected to;
// each attempt fails as address_not_allowed, naming no address. The same
// URLs are refused at registration.
func TestDeliveriesNeverReachPrivateAddresses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		rc := newReceiver(t, nil)
		port := rc.port()
		names := map[string]string{"loop.example": "127.0.0.1", "ten.example": "10.0.0.1", "meta.example": "169.254.169.254", "six.example": "::1"}
		strictCfg := r.cfg
		strictCfg.Policy = Policy{Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			if a, ok := names[host]; ok {
				return []netip.Addr{netip.MustParseAddr(a)}, nil
			}
			return nil, errors.New("no such host")
		}}
		strict := New(strictCfg)
		c := r.consumer("ca")
		want := map[string]string{} // endpoint id → the address it resolves to
		for _, host := range []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "[::1]", "loop.example", "ten.example", "meta.example", "six.example"} {
			u := "http://" + host + ":" + port + "/hooks"
			if msg := strict.cfg.Policy.URLProblem(context.Background(), u); !strings.Contains(msg, "public addresses only") {
				t.Errorf("URLProblem(%s) = %q, want it refused as not public", u, msg)
			}
			addr := strings.Trim(host, "[]")
			if a, ok := names[host]; ok {
				addr = a
			}
			want[r.endpoint(c, u).ID] = addr // registered while private addresses were allowed
		}
		r.license(c, "a.test")
		r.dispatch()
		if n := deliverWith(t, strict); n != len(want) {
			t.Fatalf("claimed %d, want %d", n, len(want))
		}
		if rc.count() != 0 {
			t.Fatalf("the receiver on 127.0.0.1 got %d requests, want none", rc.count())
		}
		for id, addr := range want {
			ds := r.deliveries(id)
			if len(ds) != 1 || ds[0].Status != StatusPending || ds[0].Attempts != 1 || ds[0].LastStatus != nil {
				t.Errorf("endpoint for %s: deliveries %+v, want one pending after a failed attempt", addr, ds)
				continue
			}
			as := r.attempts(ds[0].ID)
			if len(as) != 1 || as[0].ResponseStatus != nil || as[0].Error == nil || *as[0].Error != FailureAddressNotAllowed {
				t.Errorf("endpoint for %s: attempts %+v, want one without answer: %q", addr, as, FailureAddressNotAllowed)
			}
		}
	})
}

// A redirect is never followed: the 302 is the answer, a failed attempt,
// and where it points gets nothing.
func TestRedirectsAreNotFollowed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		target := newReceiver(t, nil)
		rc := newReceiver(t, func(_ int, w http.ResponseWriter) int {
			w.Header().Set("Location", target.url())
			return http.StatusFound
		})
		c := r.consumer("ca")
		ep := r.endpoint(c, rc.url())
		r.license(c, "a.test")
		r.dispatch()
		r.deliver()
		if rc.count() != 1 || target.count() != 0 {
			t.Fatalf("endpoint got %d, redirect target %d; want 1 and 0", rc.count(), target.count())
		}
		d := r.deliveries(ep.ID)[0]
		as := r.attempts(d.ID)
		if d.Status != StatusPending || d.LastStatus == nil || *d.LastStatus != 302 || len(as) != 1 || as[0].Error == nil ||
			*as[0].Error != FailureRedirect {
			t.Errorf("delivery %+v attempts %+v, want a failed attempt answered 302, retried", d, as)
		}
	})
}

// Two workers (two replicas' Services on one database, at once) deliver
// every event exactly once between them: a claim is a compare-and-set.
func TestTwoWorkersDeliverEachEventOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newRig(t, db, Config{})
		rc := newReceiver(t, nil)
		c := r.consumer("ca")
		ep := r.endpoint(c, rc.url())
		const n = 150
		for i := range n {
			r.license(c, fmt.Sprintf("s%d.test", i))
		}
		r.dispatch()
		workers := []*Service{r.hooks, New(r.cfg), New(r.cfg)}
		claimed := make([]int, len(workers))
		var wg sync.WaitGroup
		for i, s := range workers {
			wg.Go(func() {
				for {
					k, err := s.DeliverDue(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					if k == 0 {
						return
					}
					claimed[i] += k
				}
			})
		}
		wg.Wait()
		got := rc.delivered()
		if rc.count() != n || len(got) != n {
			t.Fatalf("%d requests for %d events, want %d for %d (claimed per worker %v)", rc.count(), len(got), n, n, claimed)
		}
		for _, d := range r.deliveries(ep.ID) {
			if d.Status != StatusDelivered || d.Attempts != 1 {
				t.Errorf("delivery %s: %s after %d attempts, want delivered at the first", d.ID, d.Status, d.Attempts)
			}
		}
		t.Logf("claimed per worker: %v", claimed)
	})
}

// Every crash point of a delivery, by hand: a worker that claims and dies
// before sending leaves the delivery to its lease, then it is sent once; a
// worker that dies after the POST and before recording it causes exactly
// one duplicate, after the lease; and that worker's late record (had it
// only stalled) adds its attempt and changes nothing else.
func TestCrashPointsCostAtMostOneDuplicate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		r := newRig(t, db, Config{Timeout: time.Second})
		rc := newReceiver(t, nil)
		c := r.consumer("ca")
		ep := r.endpoint(c, rc.url())
		lease := r.hooks.lease()
		if lease != 7*time.Second {
			t.Fatalf("lease = %v, want 2·timeout + 5s", lease)
		}

		// Claimed, then the worker dies.
		r.license(c, "a.test")
		r.dispatch()
		held, err := r.hooks.claim(ctx, senders, nil)
		if err != nil || len(held) != 1 {
			t.Fatalf("claim: %v, %v", held, err)
		}
		if n := r.deliver(); n != 0 {
			t.Fatalf("another worker claimed a held delivery (%d)", n)
		}
		r.clock.Advance(lease)
		if n := r.deliver(); n != 1 || rc.count() != 1 {
			t.Fatalf("after the lease: claimed %d, receiver got %d; want 1 and 1", n, rc.count())
		}

		// Sent, then the worker dies before recording.
		r.license(c, "b.test")
		r.dispatch()
		held, err = r.hooks.claim(ctx, senders, nil)
		if err != nil || len(held) != 1 {
			t.Fatalf("claim: %v, %v", held, err)
		}
		res := r.hooks.post(ctx, held[0])
		if !res.delivered() || rc.count() != 2 {
			t.Fatalf("post: %+v, receiver got %d", res, rc.count())
		}
		r.clock.Advance(lease - time.Microsecond)
		if n := r.deliver(); n != 0 {
			t.Fatalf("sent again within the lease (%d)", n)
		}
		r.clock.Advance(time.Microsecond)
		if n := r.deliver(); n != 1 || rc.count() != 3 {
			t.Fatalf("after the lease: claimed %d, receiver got %d; want 1 and 3", n, rc.count())
		}
		for id, k := range rc.delivered() {
			want := 1
			if id == h0(rc.got()[1:]).eventID() {
				want = 2 // the one duplicate
			}
			if k != want {
				t.Errorf("event %s delivered %d times, want %d", id, k, want)
			}
		}

		// The stalled worker wakes and records: its attempt only.
		if err := r.hooks.record(ctx, held[0], res); err != nil {
			t.Fatal(err)
		}
		ds := r.deliveries(ep.ID)
		if len(ds) != 2 || ds[1].Status != StatusDelivered || ds[1].Attempts != 1 || ds[1].Claim != nil {
			t.Fatalf("deliveries %+v, want the second delivered by the claim's holder, 1 attempt counted", ds)
		}
		if as := r.attempts(ds[1].ID); len(as) != 2 {
			t.Errorf("%d attempt rows, want 2 (the stalled worker's, and the delivery)", len(as))
		}
	})
}

// A disabled endpoint's pending deliveries are parked, not due: they never
// fill a claim ahead of other endpoints' (even one owed as the endpoint was
// being disabled), and are sent, with a new retry window, once it is
// enabled again.
func TestDisabledEndpointsDeliveriesWaitForIt(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		r := newRig(t, db, Config{})
		onRC, offRC := newReceiver(t, nil), newReceiver(t, nil)
		c := r.consumer("ca")
		r.endpoint(c, onRC.url())
		off := r.endpoint(c, offRC.url())
		for i := range claimBatch + 3 {
			r.license(c, fmt.Sprintf("s%d.test", i))
		}
		r.dispatch()
		no, yes := false, true
		if _, err := r.hooks.UpdateEndpoint(ctx, c, off.ID, EndpointPatch{Enabled: &no}); err != nil {
			t.Fatal(err)
		}
		for _, d := range r.deliveries(off.ID) {
			if d.Status != StatusPending || d.NextAttemptAt != nil {
				t.Fatalf("a disabled endpoint's delivery %+v, want pending and parked", d)
			}
		}
		// One owed just as it was disabled: due, of a disabled endpoint.
		late := r.deliveries(off.ID)[0]
		if err := db.Gorm.Model(&Delivery{}).Where("id = ?", late.ID).Update("next_attempt_at", r.clock.Now()).Error; err != nil {
			t.Fatal(err)
		}
		r.deliver()
		if offRC.count() != 0 || len(onRC.delivered()) != claimBatch+3 {
			t.Fatalf("disabled endpoint got %d, enabled one %d events; want 0 and %d", offRC.count(), len(onRC.delivered()), claimBatch+3)
		}
		if d := r.deliveries(off.ID)[0]; d.NextAttemptAt != nil || d.Attempts != 0 {
			t.Errorf("the late delivery %+v, want parked by the claim, never attempted", d)
		}
		r.clock.Advance(time.Hour)
		if _, err := r.hooks.UpdateEndpoint(ctx, c, off.ID, EndpointPatch{Enabled: &yes}); err != nil {
			t.Fatal(err)
		}
		for _, d := range r.deliveries(off.ID) {
			if d.NextAttemptAt == nil || !d.WindowStart.Equal(r.clock.Now()) {
				t.Fatalf("an enabled endpoint's delivery %+v, want due now with a new window", d)
			}
		}
		r.deliver()
		if got := offRC.delivered(); len(got) != claimBatch+3 {
			t.Errorf("enabled again, the endpoint got %d events, want %d", len(got), claimBatch+3)
		}
	})
}

// An endpoint that does not answer within WEBHOOK_TIMEOUT has not been
// delivered to: the attempt fails as a timeout, and the delivery is retried
// after its backoff.
func TestNoAnswerWithinTheTimeoutIsAFailedAttempt(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			select { // no answer before the sender gives up, or the test ends
			case <-req.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(slow.Close)
		t.Cleanup(func() { close(release) }) // first: Close waits for the handler
		r := newRig(t, db, Config{Timeout: 100 * time.Millisecond})
		c := r.consumer("ca")
		ep := r.endpoint(c, slow.URL)
		r.license(c, "a.test")
		r.dispatch()
		r.deliver()
		ds := r.deliveries(ep.ID)
		if len(ds) != 1 || ds[0].Status != StatusPending || ds[0].NextAttemptAt == nil || !ds[0].NextAttemptAt.After(r.clock.Now()) {
			t.Fatalf("deliveries %+v, want one pending, due after its backoff", ds)
		}
		as := r.attempts(ds[0].ID)
		if len(as) != 1 || as[0].ResponseStatus != nil || as[0].Error == nil || *as[0].Error != FailureTimeout {
			t.Errorf("attempts %+v, want one without an answer, saying none came in time", as)
		}
	})
}
