package tests

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// TestFaultRestartSettlesPendingIntent: the simulator commits a create and
// drops its answer (the connection closed), so serve answers 202 and keeps
// the intent pending; serve is stopped with SIGTERM (exit 0) before its
// reconciler gets to it. A new serve settles the intent by itself:
// GET /api/operations/{id} turns completed with a 201 naming the license,
// the vendor holds one site (one create committed), the license is active
// on it, recorded by the reconciler, and the client's retry replays the 201.
func TestFaultRestartSettlesPendingIntent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Parallel()
		faultRestart(t, db)
	})
}

func faultRestart(t *testing.T, db *testdb.DB) {
	const domain, key = "restart.test", "order-restart"
	body := licenseBody(domain)
	r := newFaultRig(t, db, []string{"--drop-creates", "1", "--drop-mode", "close"},
		"RECONCILE_SETTLE=1s", "RECONCILE_INTERVAL=1h") // the first serve's reconciler stays idle
	sim, env, token := r.sim, r.env, r.token
	urls, procs := startServes(t, env, 1)

	code, h, got := send(urls[0]+"/api/licenses", http.MethodPost, token, key, body)
	var pending struct {
		Code      string `json:"code"`
		Operation struct {
			ID string `json:"id"`
		} `json:"operation"`
	}
	_ = json.Unmarshal([]byte(got), &pending)
	op := pending.Operation.ID
	if code != http.StatusAccepted || pending.Code != "operation_pending" || op == "" || h.Get("Location") != "/api/operations/"+op {
		t.Fatalf("POST = %d Location %q %s, want 202 operation_pending", code, h.Get("Location"), got)
	}
	if c := statusCounts(t, db, keysTable); c[idempotency.StatusPending] != 1 || len(c) != 1 {
		t.Fatalf("intents by status %v, want the one pending", c)
	}

	serve := procs[0]
	if err := serve.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := serve.cmd.Wait(); err != nil {
		t.Fatalf("serve did not exit 0 on SIGTERM: %v", err)
	}
	if c := statusCounts(t, db, keysTable); c[idempotency.StatusPending] != 1 || len(c) != 1 {
		t.Fatalf("intents by status after the stop %v, want the one still pending", c)
	}

	urls, _ = startServes(t, append(slices.Clone(env), "RECONCILE_INTERVAL=300ms"), 1)
	api := urls[0]
	var shown struct {
		Data struct {
			Status string `json:"status"`
			Result *struct {
				Status   int    `json:"status"`
				Location string `json:"location"`
			} `json:"result"`
		} `json:"data"`
	}
	testkit.Eventually(t, 20*time.Second, func() bool {
		code, _, got := send(api+"/api/operations/"+op, http.MethodGet, token, "", "")
		if code != http.StatusOK {
			t.Fatalf("GET the operation = %d %s", code, got)
		}
		if err := json.Unmarshal([]byte(got), &shown); err != nil {
			t.Fatal(err)
		}
		return shown.Data.Status == idempotency.StatusCompleted
	}, "the new serve completes the operation")
	if r := shown.Data.Result; r == nil || r.Status != http.StatusCreated || !strings.HasPrefix(r.Location, "/api/licenses/") {
		t.Fatalf("the completed operation's result is %+v, want 201 with the license's location", r)
	}

	st := sim.stats()
	if st.CreatesCommitted != 1 || st.Sites != 1 || st.Calls["POST /sites"]["dropped"] != 1 {
		t.Errorf("the vendor committed %d creates, holds %d sites, dropped %v; want 1, 1 and the one answer dropped",
			st.CreatesCommitted, st.Sites, st.Calls["POST /sites"])
	}
	lic, _ := r.wantOneLicenseOnItsSite(domain)
	if want := "/api/licenses/" + lic.ID; shown.Data.Result.Location != want {
		t.Errorf("the operation names %s, want %s", shown.Data.Result.Location, want)
	}
	r.wantEvents(lic.ID, licenses.EventReconciled+" by "+licenses.ActorReconciler)
	code, h, got = send(api+"/api/licenses", http.MethodPost, token, key, body)
	if code != http.StatusCreated || h.Get("Idempotent-Replayed") != "true" || !strings.Contains(got, `"id":"`+lic.ID+`"`) {
		t.Errorf("the client's retry = %d replayed=%q %s, want the reconciled 201", code, h.Get("Idempotent-Replayed"), got)
	}
	if c := statusCounts(t, db, keysTable); c[idempotency.StatusCompleted] != 1 || len(c) != 1 {
		t.Errorf("intents by status %v, want the one completed", c)
	}
}
