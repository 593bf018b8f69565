package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// faultKillLatency is the simulator's latency while serve is killed: each
// vendor call of the create (the list, then the create) takes this long,
// so the kill lands while the create waits in the simulator, uncommitted,
// well within serve's work budget (4/5 of killLease).
const faultKillLatency = 600 * time.Millisecond

// TestFaultKillBeforeVendorCommit kills (SIGKILL) the serve that owns a
// keyed create while its POST /sites waits in the simulator's latency, not
// yet committed. (The other variant, the site committed and its answer
// held, is TestKillMidVendorWriteIsReconciled in kill_test.go.) The dead
// owner leaves its intent processing and the vendor holds nothing; then
//
//   - client retry: the client's retry with the same key (to another
//     replica on MariaDB, to a restarted serve on SQLite) gets 409
//     request_in_progress until the lease is over, then a 201;
//   - no retry: no client comes back; `licensor reconcile` takes the
//     intent over once its lease has been over a lease more, and creates
//     the site.
//
// Either way: exactly one create committed at the vendor, one site, one
// active license on it, and no intent left processing or pending.
func TestFaultKillBeforeVendorCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	for _, dialect := range []string{database.SQLite, database.MySQL} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			for name, retry := range map[string]bool{"client retry": true, "no retry": false} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					faultKillBeforeCommit(t, dialect, retry)
				})
			}
		})
	}
}

func faultKillBeforeCommit(t *testing.T, dialect string, retry bool) {
	const domain, key = "kill-before.test", "order-kill-before"
	body := licenseBody(domain)
	r := &killRig{faultRig: newFaultRig(t, testdb.New(t, dialect), nil, killEnv...)}
	sim, tap := r.sim, newVendorTap(t, r.sim)
	r.env = append(r.env, "VENDOR_URL="+tap.srv.URL)
	r.restartServe()
	var survivor string // on MariaDB, a second replica the client's retry goes to
	if dialect == database.MySQL {
		urls, _ := startServes(t, r.env, 1)
		survivor = urls[0]
	}

	sim.setFaults(`{"latency":"` + faultKillLatency.String() + `"}`)
	r.killMidCall(http.MethodPost, "/api/licenses", key, body, func() { tap.await(t, "POST /sites", 10*time.Second) })
	// The create the dead serve sent was given up in the latency: nothing
	// was committed.
	testkit.Eventually(t, 10*time.Second, func() bool {
		return sim.stats().Calls["POST /sites"]["canceled"] == 1
	}, "the simulator notes the create given up")
	if st := sim.stats(); st.CreatesCommitted != 0 || st.Sites != 0 {
		t.Fatalf("after the kill the vendor committed %d creates and holds %d sites, want none", st.CreatesCommitted, st.Sites)
	}
	rec := r.deadOwnersRecord("licenses.store")
	sim.clearFaults()

	if retry {
		target := survivor
		if target == "" {
			r.restartServe()
			target = "http://" + r.api
		}
		a := stormSend(target+"/api/licenses", r.token, key, body)
		if a.code != http.StatusCreated || !strings.Contains(a.body, `"domain":"`+domain+`"`) {
			t.Fatalf("the client's retry = %d %s (after %d of 409), want 201", a.code, a.body, a.tries)
		}
		t.Logf("the retry got 201 (replayed=%v) after %d answers of 409 request_in_progress", a.replayed, a.tries)
	} else {
		r.reconcileUntilSettled(rec, "licenses.store")
	}

	st := sim.stats()
	if st.CreatesCommitted != 1 || st.DuplicatesRefused != 0 {
		t.Errorf("the vendor committed %d creates, refused %d duplicates; want 1 and 0", st.CreatesCommitted, st.DuplicatesRefused)
	}
	lic, _ := r.wantOneLicenseOnItsSite(domain)
	done := r.wantAllSettled(rec.ID, http.StatusCreated)
	if ptr.Deref(done.ResourceID) != lic.ID {
		t.Errorf("the completed record names license %q, want %s", ptr.Deref(done.ResourceID), lic.ID)
	}
	wantEvent := licenses.EventCreated + " by a request"
	if !retry {
		wantEvent = licenses.EventReconciled + " by " + licenses.ActorReconciler
	}
	r.wantEvents(lic.ID, wantEvent)
	if c := statusCounts(t, r.db, keysTable); c["processing"]+c[idempotency.StatusPending] != 0 {
		t.Errorf("intents by status %v, want none processing or pending", c)
	}
}
