package tests

// Webhook delivery across real serve processes: a kill -9 mid-delivery,
// and replicas sharing the work.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// hookEnv are the webhook settings of the process tests: short enough that
// a lapsed lease (2·WEBHOOK_TIMEOUT + 5s) and a retry come within seconds.
var hookEnv = []string{"WEBHOOK_TIMEOUT=2s", "WEBHOOK_RETRY_BASE=200ms", "WEBHOOK_POLL_INTERVAL=50ms", "WEBHOOK_ALLOW_PRIVATE=true"}

// hookReceiver is a consumer's endpoint for the process tests: it notes
// each request (when it came, its event) and whether it was answered 2xx;
// hold, when set, is called before the n-th request is answered (from 0)
// and may keep it.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []hookRequest
	hold func(n int, r *http.Request)
}

// hookRequest is one request a hookReceiver got.
type hookRequest struct {
	at                time.Time
	id, event, domain string // the event's id and type, and its license's domain
	delivered         bool   // answered 2xx
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(r.Body)
		var e struct {
			ID, Type string
			Data     struct{ License struct{ Domain string } }
		}
		_ = json.Unmarshal(body, &e)
		h.mu.Lock()
		n, hold := len(h.got), h.hold
		h.got = append(h.got, hookRequest{at: now, id: e.ID, event: e.Type, domain: e.Data.License.Domain})
		h.mu.Unlock()
		if hold != nil {
			hold(n, r)
		}
		if r.Context().Err() != nil {
			return // its sender is gone
		}
		w.WriteHeader(http.StatusNoContent)
		h.mu.Lock()
		h.got[n].delivered = true
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// counts are the requests and deliveries per event id.
func (h *hookReceiver) counts() (requests, delivered map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	requests, delivered = map[string]int{}, map[string]int{}
	for _, r := range h.got {
		requests[r.id]++
		if r.delivered {
			delivered[r.id]++
		}
	}
	return requests, delivered
}

// await is when the first license.created of domain arrived, waiting for
// it until within has passed.
func (h *hookReceiver) await(t *testing.T, domain string, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	testkit.Eventually(t, within, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		i := slices.IndexFunc(h.got, func(r hookRequest) bool { return r.event == "license.created" && r.domain == domain })
		if i >= 0 {
			at = h.got[i].at
		}
		return i >= 0
	}, "the webhook of %s never arrived", domain)
	return at
}

// hookEndpoint registers an endpoint of the consumer acme (whose token
// issueToken made) for every license event, straight in the database under
// the processes' APP_KEY, so that these tests need no more of the API than
// licenses.
func hookEndpoint(t *testing.T, db *testdb.DB, url string) webhooks.Endpoint {
	t.Helper()
	cipher, err := crypt.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	hooks := webhooks.New(webhooks.Config{DB: db.Gorm, Events: events.New(db.Gorm, nil, cipher), Cipher: cipher,
		Policy: webhooks.Policy{AllowPrivate: true}})
	var consumer string
	if err := db.Gorm.Raw("SELECT id FROM consumers WHERE name = ?", "acme").Scan(&consumer).Error; err != nil || consumer == "" {
		t.Fatalf("the consumer acme: %q, %v", consumer, err)
	}
	ep, _, err := hooks.CreateEndpoint(context.Background(), consumer, webhooks.EndpointInput{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// eventIDs are the public ids of every consumer event.
func eventIDs(t *testing.T, db *testdb.DB) []string {
	t.Helper()
	var ids []string
	if err := db.Gorm.Raw("SELECT public_id FROM consumer_events ORDER BY id").Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	return ids
}

// A serve killed (SIGKILL) while its receiver holds a delivery's request
// leaves the delivery claimed; the serve started again delivers it once the
// claim's lease has lapsed: the receiver got the event twice (the one
// duplicate a crash may cost), the delivery is delivered, its attempt the
// restarted serve's.
func TestWebhookDeliveryKillMidDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newFaultRig(t, db, nil, hookEnv...)
		env, token := r.env, r.token
		rc := newHookReceiver(t)
		arrived, release := make(chan struct{}), make(chan struct{})
		rc.hold = func(n int, r *http.Request) {
			if n == 0 {
				close(arrived)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
		}
		defer close(release)
		hookEndpoint(t, db, rc.srv.URL+"/hooks")
		urls, procs := startServes(t, env, 1)
		if code, _, body := send(urls[0]+"/api/licenses", http.MethodPost, token, "kill-1", licenseBody("kill-hook.test")); code != http.StatusCreated {
			t.Fatalf("create = %d %s", code, body)
		}
		select {
		case <-arrived:
		case <-time.After(20 * time.Second):
			t.Fatal("the delivery never reached the receiver")
		}
		if err := procs[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = procs[0].cmd.Wait()
		killedAt := time.Now()
		if st := statusCounts(t, db, "webhook_deliveries"); st[webhooks.StatusPending] != 1 {
			t.Fatalf("deliveries after the kill %v, want the one pending (claimed)", st)
		}
		startServes(t, env, 1)
		testkit.Eventually(t, 30*time.Second, func() bool { return statusCounts(t, db, "webhook_deliveries")[webhooks.StatusDelivered] == 1 },
			"the delivery delivered after the restart")
		if waited := time.Since(killedAt); waited < 5*time.Second {
			t.Errorf("delivered %v after the kill: before the claim's lease (9s) lapsed?", waited)
		}
		ids := eventIDs(t, db)
		requests, delivered := rc.counts()
		if len(ids) != 1 || requests[ids[0]] != 2 || delivered[ids[0]] != 1 {
			t.Errorf("event %v: %v requests, %v delivered; want 2 requests (one duplicate) and 1 delivery", ids, requests, delivered)
		}
		var attempts int64
		if err := db.Gorm.Table("webhook_attempts").Count(&attempts).Error; err != nil || attempts != 1 {
			t.Errorf("%d attempts recorded (%v), want the restarted serve's 1: the killed one recorded nothing", attempts, err)
		}
	})
}

// Replicas deliver every event of many licenses between them, each once
// (no crash here, so no duplicate): on MariaDB, and on one SQLite file
// shared by two processes.
func TestWebhookDeliveryReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		const replicas, perReplica = 2, 40
		r := newFaultRig(t, db, nil, hookEnv...)
		env, token := r.env, r.token
		rc := newHookReceiver(t)
		hookEndpoint(t, db, rc.srv.URL+"/hooks")
		urls, _ := startServes(t, env, replicas)
		var wg sync.WaitGroup
		for r, u := range urls {
			wg.Go(func() {
				for i := range perReplica {
					domain := fmt.Sprintf("replica-%d-%d.test", r, i)
					if code, _, body := send(u+"/api/licenses", http.MethodPost, token, domain, licenseBody(domain)); code != http.StatusCreated {
						t.Errorf("create %s = %d %s", domain, code, body)
					}
				}
			})
		}
		wg.Wait()
		want := replicas * perReplica
		testkit.Eventually(t, 60*time.Second, func() bool { return statusCounts(t, db, "webhook_deliveries")[webhooks.StatusDelivered] == want },
			"%d deliveries delivered", want)
		ids := eventIDs(t, db)
		requests, delivered := rc.counts()
		duplicates := 0
		for _, id := range ids {
			if delivered[id] != 1 {
				t.Errorf("event %s delivered %d times, want once", id, delivered[id])
			}
			duplicates += max(0, requests[id]-1)
		}
		if len(ids) != want || len(requests) != want {
			t.Errorf("%d events, %d received, want %d and %d", len(ids), len(requests), want, want)
		}
		t.Logf("%s: %d events delivered by %d replicas, %d duplicates", db.Dialect, len(ids), replicas, duplicates)
		if duplicates != 0 {
			t.Errorf("%d duplicates without a crash, want 0", duplicates)
		}
	})
}
