package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Database loss: dblossWorkers clients send keyed creates (a new key and
// domain each) one after another; the outage lasts at least dblossOutage
// and dblossOutageAnswers answers.
const (
	dblossWorkers       = 4
	dblossOutage        = 1500 * time.Millisecond
	dblossOutageAnswers = 20
)

// dblossCall is one create a worker sent, and its answer.
type dblossCall struct {
	worker       int
	key, domain  string
	began, ended time.Time
	code         int
	retryAfter   string
	body         string
}

// TestFaultDatabaseLoss runs `serve` on MariaDB through an in-test TCP
// proxy and cuts the connection while clients send keyed creates. Every
// create sent during the outage is answered 503 temporarily_unavailable
// with Retry-After, /readyz answers 503, and the vendor gets no call at
// all once the calls in flight at the cut have ended (GET /_sim/stats
// unchanged over the outage). Once the database is back, every key that
// was not answered 201 is retried with its body and completes exactly
// once: one site per domain at the vendor, one active license on it, one
// create committed per domain, no intent left unsettled, and a further
// retry replays the same 201.
func TestFaultDatabaseLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	db := testdb.New(t, database.MySQL) // skipped without TEST_MYSQL_DSN (failed under CI=true)
	p, viaProxy := proxiedMySQL(t, db, 500*time.Millisecond)
	r := newFaultRig(t, db, []string{"--latency", "100ms"}, // some creates are at the vendor when the cut comes
		"DB_URL="+viaProxy.URL, "DB_QUERY_TIMEOUT=500ms", "IDEMPOTENCY_LOCK_TIMEOUT=2s", "RECONCILE_SETTLE=1s", "RECONCILE_INTERVAL=500ms")
	sim, token := r.sim, r.token
	urls, _ := startServes(t, r.env, 1)
	api := urls[0]

	var (
		mu    sync.Mutex
		calls []dblossCall
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		cutAt atomic.Pointer[time.Time]
	)
	for w := range dblossWorkers {
		wg.Go(func() {
			outageCalls := 0
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond): // pacing: the outage's 503s come fast
				}
				if cut := cutAt.Load(); cut != nil && time.Now().After(*cut) {
					if outageCalls == dblossOutageAnswers/dblossWorkers {
						continue // enough keys to retry: wait for the end of the outage
					}
					outageCalls++
				}
				c := dblossCall{worker: w, key: fmt.Sprintf("dbloss-%d-%d", w, n), domain: fmt.Sprintf("dbloss-%d-%d.test", w, n)}
				c.began = time.Now()
				var h http.Header
				c.code, h, c.body = send(api+"/api/licenses", http.MethodPost, token, c.key, licenseBody(c.domain))
				c.ended = time.Now()
				if h != nil {
					c.retryAfter = h.Get("Retry-After")
				}
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			}
		})
	}
	snapshot := func() []dblossCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]dblossCall(nil), calls...)
	}
	// afterCut counts the answers to creates sent after the cut, and the
	// workers that had one.
	afterCut := func() (answers, workers int) {
		cut := cutAt.Load()
		seen := map[int]bool{}
		for _, c := range snapshot() {
			if cut != nil && c.began.After(*cut) {
				answers++
				seen[c.worker] = true
			}
		}
		return answers, len(seen)
	}

	testkit.Eventually(t, 20*time.Second, func() bool {
		n := 0
		for _, c := range snapshot() {
			if c.code == http.StatusCreated {
				n++
			}
		}
		return n >= 8
	}, "8 creates answered 201 before the cut")
	cut := time.Now()
	cutAt.Store(&cut)
	p.Cut()
	// Each worker's create in flight at the cut has ended once each has an
	// answer to one sent after it: from then on the vendor must hear nothing.
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, w := afterCut()
		return w == dblossWorkers
	}, "every worker answered after the cut")
	before := sim.stats()
	if code, _, body := send(api+"/readyz", http.MethodGet, "", "", ""); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the outage = %d %s, want 503", code, body)
	}
	testkit.Eventually(t, 30*time.Second, func() bool {
		n, _ := afterCut()
		return n >= dblossOutageAnswers && time.Since(cut) >= dblossOutage
	}, "the outage's answers")
	close(stop)
	wg.Wait()
	if code, _, body := send(api+"/readyz", http.MethodGet, "", "", ""); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz at the end of the outage = %d %s, want 503", code, body)
	}
	after := sim.stats()
	if after.total() != before.total() {
		t.Errorf("the vendor got %d calls while the database was gone (%v, then %v), want none",
			after.total()-before.total(), before.Calls, after.Calls)
	}
	restored := time.Now()
	p.Restore()
	t.Logf("outage of %s; %d calls to the vendor in all before it", restored.Sub(cut).Round(time.Millisecond), before.total())

	all := snapshot()
	var domains, retry []string
	keyOf := map[string]string{}
	outage := 0
	for _, c := range all {
		domains = append(domains, c.domain)
		keyOf[c.domain] = c.key
		switch {
		case c.began.After(cut):
			outage++
			if c.code != http.StatusServiceUnavailable || c.retryAfter == "" || !strings.Contains(c.body, `"temporarily_unavailable"`) {
				t.Errorf("%s sent during the outage = %d Retry-After %q %s, want 503 temporarily_unavailable with Retry-After",
					c.key, c.code, c.retryAfter, c.body)
			}
		case c.code != http.StatusCreated && c.code != http.StatusServiceUnavailable:
			t.Errorf("%s in flight at the cut = %d %s, want 201 or 503", c.key, c.code, c.body)
		}
		if c.code != http.StatusCreated {
			retry = append(retry, c.domain)
		}
	}
	t.Logf("%d creates in all, %d sent during the outage, %d to retry", len(all), outage, len(retry))

	waitFor(t, api+"/readyz", "", http.StatusOK)
	first := map[string]string{}
	var retried sync.WaitGroup
	for _, d := range retry {
		retried.Go(func() {
			code, body := dblossRetry(api, token, keyOf[d], licenseBody(d))
			if code != http.StatusCreated {
				t.Errorf("%s retried after the outage = %d %s, want 201", keyOf[d], code, body)
			}
			mu.Lock()
			first[d] = body
			mu.Unlock()
		})
	}
	retried.Wait()
	for _, d := range retry { // and once more: the stored answer
		code, h, body := send(api+"/api/licenses", http.MethodPost, token, keyOf[d], licenseBody(d))
		if code != http.StatusCreated || h.Get("Idempotent-Replayed") != "true" || body != first[d] {
			t.Errorf("%s retried again = %d replayed=%q %s, want the replay of %s", keyOf[d], code, h.Get("Idempotent-Replayed"), body, first[d])
		}
	}

	wantOneLicensePerSite(t, db, sim, domains)
	st := sim.stats()
	if st.CreatesCommitted != len(domains) || st.Sites != len(domains) || st.DeletesCommitted != 0 {
		t.Errorf("the vendor committed %d creates and %d deletes and holds %d sites, want %d, 0 and %d",
			st.CreatesCommitted, st.DeletesCommitted, st.Sites, len(domains), len(domains))
	}
	if c := statusCounts(t, db, keysTable); c[idempotency.StatusCompleted] != len(domains) || len(c) != 1 {
		t.Errorf("intents by status %v, want %d completed and nothing else", c, len(domains))
	}
}

// dblossRetry retries a keyed create until it is answered other than 409,
// 202 or 503 (the database coming back, a dead owner's lease, a pending
// intent the reconciler settles), within a deadline.
func dblossRetry(api, token, key, body string) (int, string) {
	for deadline := time.Now().Add(30 * time.Second); ; <-time.After(200 * time.Millisecond) {
		code, _, got := send(api+"/api/licenses", http.MethodPost, token, key, body)
		switch code {
		case http.StatusConflict, http.StatusAccepted, http.StatusServiceUnavailable:
			if time.Now().Before(deadline) && (code != http.StatusConflict || strings.Contains(got, `"request_in_progress"`)) {
				continue
			}
		}
		return code, got
	}
}
