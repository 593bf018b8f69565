package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/client"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Vendor chaos: for chaosDuration, chaosWorkers clients create licenses for
// chaosDomains domains through a vendor that fails at random (seeded).
// chaosDuration is what the suite's CI budget allows.
const (
	chaosDuration = 30 * time.Second
	chaosDomains  = 60
	chaosWorkers  = 8
	chaosSeed     = 42
)

// chaosFaults are the simulator's faults during the run: 429s, 500s and
// answers lost (held until serve's VENDOR_TIMEOUT), before or after the
// work at even odds, on top of a jittered latency.
var chaosFaults = []string{
	"--seed", fmt.Sprint(chaosSeed), "--latency", "10ms", "--jitter", "40ms",
	"--429-rate", "0.1", "--retry-after", "0", "--5xx-rate", "0.1", "--drop-rate", "0.05",
	"--drop-mode", "hang", "--fault-phase", "random",
}

// TestFaultVendorChaos sends creates for 60 domains through a vendor-sim
// failing at random: keyed ones through the project's Go client (which
// retries with one key), keyless ones sent once, and keyed duplicates in
// flight (one key sent twice at once). On MariaDB two replicas share the
// work; on SQLite one serve. Then the faults are cleared and serve's own
// reconciler left to settle everything. Every success named the domain's
// one license; the vendor committed exactly one create per domain and
// holds one site each; one active license per domain points at it; no
// intent is pending, processing or failed; and a one-shot `licensor
// reconcile` finds nothing left to do.
func TestFaultVendorChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Parallel()
		faultChaos(t, db)
	})
}

// total is the sum of counts.
func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// chaosOutcome is what a create's caller learnt: the license it was
// answered with, or the error it gave up with.
type chaosOutcome struct {
	kind, domain string
	licenseID    string // empty when it gave up
	err          string
}

func faultChaos(t *testing.T, db *testdb.DB) {
	r := newFaultRig(t, db, chaosFaults,
		"VENDOR_TIMEOUT=1s", "VENDOR_RETRY_BASE=50ms", "VENDOR_RETRY_MAX_WAIT=1s",
		"IDEMPOTENCY_LOCK_TIMEOUT=5s", "RECONCILE_INTERVAL=500ms", "RECONCILE_SETTLE=2s")
	sim, env, token := r.sim, r.env, r.token
	replicas := 1
	if db.Dialect == database.MySQL {
		replicas = 2
	}
	urls, _ := startServes(t, env, replicas)
	hc := &http.Client{Transport: contractClient.Transport, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	clients := make([]*client.Client, len(urls))
	for i, u := range urls {
		clients[i] = client.New(u, token, client.WithHTTPClient(hc), client.WithMaxAttempts(6), client.WithBackoff(100*time.Millisecond, time.Second))
	}
	domains := make([]string, chaosDomains)
	for i := range domains {
		domains[i] = fmt.Sprintf("chaos-%02d.test", i)
	}

	var (
		mu       sync.Mutex
		outcomes []chaosOutcome
		calls    atomic.Int64
		wg       sync.WaitGroup
	)
	record := func(o chaosOutcome) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	// keyed creates through the Go client; a give-up is an outcome, but a
	// definite refusal (a 4xx it does not retry) is a broken guarantee.
	keyed := func(c *client.Client, kind, domain, key string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		lic, err := c.CreateLicense(ctx, client.CreateLicenseInput{Name: "Chaos " + domain, Domain: domain, IdempotencyKey: key})
		o := chaosOutcome{kind: kind, domain: domain, licenseID: lic.ID}
		var apiErr *client.APIError
		switch {
		case errors.As(err, &apiErr) && !apiErr.Retryable():
			t.Errorf("%s create of %s refused: %v", kind, domain, err)
		case err != nil:
			o.err = err.Error()
		case lic.Domain != domain || lic.Status != "active":
			t.Errorf("%s create of %s answered %+v", kind, domain, lic)
		}
		record(o)
	}
	// Domains come up one by one over the first four fifths of the run,
	// none skipped: a call takes the next domain once it is due, otherwise
	// one of the newest four, so every domain gets a burst of concurrent
	// creates of every kind while it has no license yet.
	var introduced atomic.Int64 // domains come up so far
	began := time.Now()
	end := began.Add(chaosDuration)
	every := chaosDuration * 4 / 5 / chaosDomains
	// pick also says whether the call introduces its domain: that one is a
	// keyed create through the Go client, which retries until it settles,
	// so every domain gets a license whatever its other calls meet (a
	// domain whose only calls were keyless ones refused for good would
	// rightly have none, and the run would measure the load, not the
	// guarantee).
	pick := func(rng *rand.Rand) (int, bool) {
		due := min(int64(time.Since(began)/every)+1, chaosDomains)
		for {
			up := introduced.Load()
			if up >= due {
				return max(int(up)-1-rng.IntN(4), 0), false
			}
			if introduced.CompareAndSwap(up, up+1) {
				return int(up), true
			}
		}
	}
	for w := range chaosWorkers {
		rng := rand.New(rand.NewPCG(chaosSeed, uint64(w)))
		wg.Go(func() {
			for time.Now().Before(end) {
				n := calls.Add(1) - 1
				i, first := pick(rng)
				domain, api := domains[i], urls[n%int64(len(urls))]
				c := clients[n%int64(len(clients))]
				k := rng.IntN(3) // drawn every call, so the seeded sequence does not shift
				if first {
					k = 0
				}
				switch k {
				case 0:
					keyed(c, "keyed", domain, client.NewIdempotencyKey())
				case 1: // keyless: one attempt, it cannot be retried safely
					code, _, body := send(api+"/api/licenses", http.MethodPost, token, "", licenseBody(domain))
					o := chaosOutcome{kind: "keyless", domain: domain}
					switch code {
					case http.StatusCreated, http.StatusOK:
						o.licenseID = decodeLicense(body).ID
					case http.StatusAccepted, http.StatusServiceUnavailable:
						o.err = fmt.Sprintf("%d %s", code, body)
					default:
						t.Errorf("keyless create of %s = %d %s", domain, code, body)
					}
					record(o)
				case 2: // the same key twice at once, to both replicas on MariaDB
					key := client.NewIdempotencyKey()
					var pair sync.WaitGroup
					for i := range 2 {
						pair.Go(func() { keyed(clients[(int(n)+i)%len(clients)], "duplicate", domain, key) })
					}
					pair.Wait()
				}
			}
		})
	}
	wg.Wait()
	if n := introduced.Load(); n != chaosDomains {
		t.Fatalf("the run sent creates for %d domains of %d: too few calls for the run's length", n, chaosDomains)
	}
	during := sim.stats()
	sim.clearFaults()
	t.Logf("%d calls in %s; the vendor answered %v", calls.Load(), chaosDuration, during.Calls)

	cleared := time.Now()
	testkit.Eventually(t, 90*time.Second, func() bool { return unsettled(t, db) == 0 }, "serve's reconciler settles every intent")
	t.Logf("settled %s after the faults were cleared", time.Since(cleared).Round(time.Millisecond))

	wantOneLicensePerSite(t, db, sim, domains)
	lics := licensesByDomain(t, db)
	gaveUp := map[string]int{}
	for _, o := range outcomes {
		if o.licenseID == "" {
			gaveUp[o.kind]++
			continue
		}
		if ls := lics[o.domain]; len(ls) == 1 && ls[0].ID != o.licenseID {
			t.Errorf("a %s create of %s was answered license %s; the domain's license is %s", o.kind, o.domain, o.licenseID, ls[0].ID)
		}
	}
	t.Logf("%d outcomes; gave up (retried later by nobody, settled by the reconciler): %v", len(outcomes), gaveUp)
	st := sim.stats()
	if st.CreatesCommitted != chaosDomains || st.DeletesCommitted != 0 || st.Sites != chaosDomains {
		t.Errorf("the vendor committed %d creates (refused %d duplicates) and %d deletes, and holds %d sites; want %d, 0 deletes, %d sites",
			st.CreatesCommitted, st.DuplicatesRefused, st.DeletesCommitted, st.Sites, chaosDomains, chaosDomains)
	}
	// Every intent is settled: completed, or superseded by a later create of
	// the same domain (never executed after it; its key, retried, runs for
	// real and answers the license held).
	if c := statusCounts(t, db, keysTable); c[idempotency.StatusCompleted] == 0 || c[idempotency.StatusCompleted]+c["superseded"] != total(c) {
		t.Errorf("intents by status %v, want every one completed or superseded", c)
	}
	if out := runCmd(t, env, "reconcile"); out != "0 pending intent(s) worked\n" {
		t.Errorf("a one-shot reconcile found work left: %q", out)
	}
}
