package tests

import (
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// killLease is IDEMPOTENCY_LOCK_TIMEOUT for serve and for reconcile. serve's
// work budget is four fifths of it, so the kill must land within 1.6 s of the
// reservation (or serve would settle the intent as pending by itself); the
// reconciler takes the dead owner's record over one more lease after its
// lease ends, about 4 s after the reservation.
const killLease = 2 * time.Second

// TestKillMidVendorWriteIsReconciled runs real processes: `serve` is killed
// with SIGKILL while a vendor write it sent is committed at the vendor and its
// answer held (vendor-sim --drop-mode hang), for a keyed create, a keyless
// create and a revoke. The dead owner's record is left processing; a
// one-shot `licensor reconcile` leaves it alone while its lease could still
// be alive, then takes it over and converges on the vendor: the vendor and
// the database agree, and no intent is left processing or pending.
func TestKillMidVendorWriteIsReconciled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, dialect := range []string{database.SQLite, database.MySQL} {
		t.Run(dialect, func(t *testing.T) {
			for name, kill := range map[string]func(t *testing.T){
				"keyed create":   func(t *testing.T) { killCreate(t, dialect, "order-kill-1") },
				"keyless create": func(t *testing.T) { killCreate(t, dialect, "") },
				"revoke":         func(t *testing.T) { killRevoke(t, dialect) },
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					kill(t)
				})
			}
		})
	}
}

// killCreate kills serve mid-POST /sites of a create (keyed when key is not
// empty), reconciles, and checks that exactly one site and one active
// license exist for the domain, the one pointing at the other.
func killCreate(t *testing.T, dialect, key string) {
	r := newKillRig(t, testdb.New(t, dialect), "--drop-creates", "1")
	const domain = "kill.test"
	body := `{"name":"Kill","domain":"` + domain + `"}`

	r.killMidCall(http.MethodPost, "/api/licenses", key, body, r.committedAndHeld("created"))
	rec := r.deadOwnersRecord("licenses.store")
	if key != "" && rec.Key != key {
		t.Errorf("the record is keyed %q, want the client's key", rec.Key)
	}
	if key == "" && !strings.HasPrefix(rec.Key, "auto:") {
		t.Errorf("the keyless create is on the record as %q, want auto:<request id>", rec.Key)
	}
	if n := len(r.sim.sites(domain)); n != 1 {
		t.Fatalf("the vendor holds %d sites for the domain after the kill, want the 1 committed", n)
	}

	r.reconcileUntilSettled(rec, "licenses.store")

	if n := r.simCalls("POST", "/sites"); n != 1 {
		t.Errorf("the vendor got %d creates, want the 1 that serve sent: the reconciler adopts, it does not create again", n)
	}
	lic, site := r.wantOneLicenseOnItsSite(domain)
	if lic.ActiveDomain == nil || *lic.ActiveDomain != domain {
		t.Errorf("license active_domain %v; want %s", lic.ActiveDomain, domain)
	}
	r.wantEvents(lic.ID, licenses.EventReconciled+" by "+licenses.ActorReconciler)
	done := r.wantAllSettled(rec.ID, http.StatusCreated)
	if ptr.Deref(done.ResourceID) != lic.ID || ptr.Deref(done.ExternalRef) != site.ID {
		t.Errorf("the completed record names license %q and vendor ref %q, want %s and %s",
			ptr.Deref(done.ResourceID), ptr.Deref(done.ExternalRef), lic.ID, site.ID)
	}

	// A serve started after the crash shows the license as the vendor holds
	// it (the key compared through the API: it may be encrypted at rest),
	// and replays the reconciled 201 to the client's retry.
	r.restartServe()
	want := apiLicense{ID: lic.ID, Domain: domain, LicenseKey: site.LicenseKey, Status: licenses.StatusActive, VendorSiteID: site.ID}
	code, _, got := send("http://"+r.api+"/api/licenses/"+lic.ID, http.MethodGet, r.token, "", "")
	if shown := decodeLicense(got); code != http.StatusOK || shown != want {
		t.Errorf("GET the license = %d %+v, want %+v", code, shown, want)
	}
	if key != "" {
		code, h, got := send("http://"+r.api+"/api/licenses", http.MethodPost, r.token, key, body)
		if shown := decodeLicense(got); code != http.StatusCreated || h.Get("Idempotent-Replayed") != "true" || shown != want {
			t.Errorf("retry after the crash = %d replayed=%q %+v, want the reconciled 201 %+v", code, h.Get("Idempotent-Replayed"), shown, want)
		}
	}
}

// killRevoke creates a license normally, then kills serve mid-DELETE
// /sites/{id} of its revoke, reconciles, and checks that the site is gone
// and the license revoked.
func killRevoke(t *testing.T, dialect string) {
	r := newKillRig(t, testdb.New(t, dialect), "--drop-deletes", "1")
	const domain = "revoke-kill.test"

	code, _, body := send("http://"+r.api+"/api/licenses", http.MethodPost, r.token, "", `{"name":"Revoke","domain":"`+domain+`"}`)
	if code != http.StatusCreated {
		t.Fatalf("create = %d %s, want 201", code, body)
	}
	created := decodeLicense(body)
	if created.ID == "" || created.VendorSiteID == "" {
		t.Fatalf("create answered %s", body)
	}
	id := created.ID

	r.killMidCall(http.MethodDelete, "/api/licenses/"+id, "", "", r.committedAndHeld("deleted"))
	rec := r.deadOwnersRecord("licenses.destroy")
	if rec.Key != id {
		t.Errorf("the revoke is on the record keyed %q, want the license id %s", rec.Key, id)
	}
	if lics := r.licenseRows(domain); len(lics) != 1 || lics[0].Status != licenses.StatusRevoking {
		t.Fatalf("after the kill the licenses for the domain are %+v, want one revoking", lics)
	}
	if n := len(r.sim.sites(domain)); n != 0 {
		t.Fatalf("the vendor holds %d sites for the domain after the kill, want the delete committed", n)
	}

	r.reconcileUntilSettled(rec, "licenses.destroy")

	if sites := r.sim.sites(domain); len(sites) != 0 {
		t.Errorf("the vendor holds %d sites for the domain, want none: %v", len(sites), sites)
	}
	if n := r.simCallsReach("DELETE", "/sites/"+created.VendorSiteID, 2); n != 2 {
		t.Errorf("the vendor got %d deletes of the site, want 2 (serve's, then the reconciler's, answered 404)", n)
	}
	lics := r.licenseRows(domain)
	if len(lics) != 1 {
		t.Fatalf("%d license rows for the domain, want 1: %+v", len(lics), lics)
	}
	if l := lics[0]; l.ID != id || l.Status != licenses.StatusRevoked || l.ActiveDomain != nil || l.RevokedAt == nil {
		t.Errorf("license %s: status %q, active_domain %v, revoked_at %v; want %s revoked, its domain freed",
			l.ID, l.Status, l.ActiveDomain, l.RevokedAt, id)
	}
	r.wantEvents(id, licenses.EventCreated+" by a request", licenses.EventRevoked+" by "+licenses.ActorReconciler)
	r.wantAllSettled(rec.ID, http.StatusNoContent)
}

// killRig is a fault rig with a serve the test kills, started again on a
// fresh address by restartServe.
type killRig struct {
	*faultRig
	api   string
	serve *process

	killedAt time.Time // when serve got its SIGKILL
}

// killEnv is the kill rig's environment: the leases of killLease, and only
// the reconcile command (or a client's retry) settles an intent.
var killEnv = []string{"IDEMPOTENCY_LOCK_TIMEOUT=" + killLease.String(), "RECONCILE_SETTLE=1s", "RECONCILE_INTERVAL=1h"}

// newKillRig starts vendor-sim (--drop-mode hang and simArgs) and serve on
// db, and issues a token.
func newKillRig(t *testing.T, db *testdb.DB, simArgs ...string) *killRig {
	t.Helper()
	r := &killRig{faultRig: newFaultRig(t, db, append([]string{"--drop-mode", "hang"}, simArgs...),
		append([]string{"VENDOR_TIMEOUT=10s"}, killEnv...)...)}
	r.restartServe()
	return r
}

// restartServe starts a serve on a fresh address.
func (r *killRig) restartServe() {
	r.t.Helper()
	r.api = testkit.FreeAddr(r.t)
	r.serve = start(r.t, append(slices.Clone(r.env), "APP_ADDR="+r.api), "serve")
	waitFor(r.t, "http://"+r.api+"/healthz", "", http.StatusOK)
}

// restartWith stops serve gracefully (SIGTERM) and starts another with env
// added to the rig's environment.
func (r *killRig) restartWith(env ...string) {
	r.t.Helper()
	r.env = append(r.env, env...)
	_ = r.serve.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.serve.cmd.Wait()
	r.restartServe()
}

// killMidCall sends the request to serve and, once held returns (the
// vendor holds the call), kills serve with SIGKILL. The client must get no
// answer at all.
func (r *killRig) killMidCall(method, path, key, body string, held func()) {
	r.t.Helper()
	answered := make(chan int, 1)
	go func() {
		code, _, _ := send("http://"+r.api+path, method, r.token, key, body)
		answered <- code
	}()
	held()
	if err := r.serve.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		r.t.Fatalf("kill serve: %v", err)
	}
	r.killedAt = time.Now()
	_ = r.serve.cmd.Wait() // killed: its error says so
	select {
	case code := <-answered:
		if code != 0 {
			r.t.Fatalf("serve answered %d before it died: the kill came after its work budget (%s)", code, idempotency.WorkBudget(killLease))
		}
	case <-time.After(10 * time.Second):
		r.t.Fatal("the client still waits for the killed serve")
	}
}

// committedAndHeld waits until the simulator says it committed the write
// (done: "created", "deleted") and holds its answer.
func (r *killRig) committedAndHeld(done string) func() {
	return func() { r.waitOutput(r.sim.proc, `fault="`+done+`, answer dropped: hang"`) }
}

// waitOutput polls a process's output until it holds want.
func (r *killRig) waitOutput(p *process, want string) {
	r.t.Helper()
	if !testkit.Poll(10*time.Second, func() bool { return strings.Contains(p.output.String(), want) }) {
		r.t.Fatalf("no %s in the output in time:\n%s", want, p.output.String())
	}
}

// deadOwnersRecord is the one record of the operation, which the killed
// serve must have left processing, its lease still on.
func (r *killRig) deadOwnersRecord(operation string) idempotency.Record {
	r.t.Helper()
	var recs []idempotency.Record
	if err := r.db.Gorm.Where("operation = ?", operation).Find(&recs).Error; err != nil {
		r.t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != "processing" || recs[0].LockedUntil == nil {
		r.t.Fatalf("%s records after the kill: %+v; want one processing with a lease: the intent on the record before the vendor call", operation, recs)
	}
	r.t.Logf("serve killed %s after it put the intent on the record (its work budget: %s)",
		r.killedAt.Sub(recs[0].CreatedAt).Round(time.Millisecond), idempotency.WorkBudget(killLease))
	return recs[0]
}

// reconcileUntilSettled runs `licensor reconcile` (one pass a process) until
// a pass settles rec. No pass may claim it while its dead owner could still
// be alive: before its lease ended one lease ago.
func (r *killRig) reconcileUntilSettled(rec idempotency.Record, operation string) {
	r.t.Helper()
	due := rec.LockedUntil.Add(killLease)
	idle := 0
	for deadline := time.Now().Add(10*killLease + 5*time.Second); ; <-time.After(100 * time.Millisecond) {
		out := runCmd(r.t, r.env, "reconcile")
		ended := time.Now()
		if out == "0 pending intent(s) worked\n" {
			idle++
			if ended.After(deadline) {
				r.t.Fatalf("reconcile still worked nothing %s after the record's lease ended", ended.Sub(*rec.LockedUntil))
			}
			continue
		}
		if ended.Before(due) {
			r.t.Errorf("reconcile took the record over at %s, before %s: its owner's lease may still have been alive", ended.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano))
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if fields := strings.Split(lines[0], "\t"); len(lines) != 2 || lines[1] != "1 pending intent(s) worked" ||
			!slices.Contains(fields, operation) || !slices.Contains(fields, "completed") {
			r.t.Fatalf("reconcile printed %q, want the one %s intent completed", out, operation)
		}
		r.t.Logf("settled by reconcile run %d, %s after the kill's lease ended", idle+1, ended.Sub(*rec.LockedUntil).Round(time.Millisecond))
		return
	}
}

// simCalls counts the requests the simulator logged for method and path.
func (r *killRig) simCalls(method, path string) int {
	return strings.Count(r.sim.proc.output.String(), "method="+method+" path="+path+" ")
}

// simCallsReach is simCalls once it reaches want, or when a deadline
// passes: a call's line reaches the vendor-sim's captured output a moment
// after its answer reached the caller (the sim logs, then the pipe is
// copied), so a count read as soon as the caller settled may miss the last
// call.
func (r *killRig) simCallsReach(method, path string, want int) int {
	testkit.Poll(5*time.Second, func() bool { return r.simCalls(method, path) >= want })
	return r.simCalls(method, path)
}

// licenseRows are the license rows of the domain, whatever their status.
func (r *faultRig) licenseRows(domain string) []licenses.License {
	r.t.Helper()
	var lics []licenses.License
	if err := r.db.Gorm.Where("domain = ?", domain).Order("created_at").Find(&lics).Error; err != nil {
		r.t.Fatal(err)
	}
	return lics
}

// wantEvents fails unless the license's audit trail, oldest first, is want,
// each "event by actor" (a request's id shown as "a request").
func (r *faultRig) wantEvents(licenseID string, want ...string) {
	r.t.Helper()
	var evs []licenses.Event
	if err := r.db.Gorm.Where("license_id = ?", licenseID).Order("id").Find(&evs).Error; err != nil {
		r.t.Fatal(err)
	}
	out := []string{}
	for _, e := range evs {
		actor := e.Actor
		if actor != licenses.ActorReconciler {
			actor = "a request"
		}
		out = append(out, e.Event+" by "+actor)
	}
	if !slices.Equal(out, want) {
		r.t.Errorf("license events = %v, want %v", out, want)
	}
}

// wantOneLicenseOnItsSite stops the test unless the vendor holds one site
// for domain and the domain's one license row is active on it
// (wantOneLicensePerSite); it returns both.
func (r *faultRig) wantOneLicenseOnItsSite(domain string) (licenses.License, simSite) {
	r.t.Helper()
	wantOneLicensePerSite(r.t, r.db, r.sim, []string{domain})
	lics, sites := r.licenseRows(domain), r.sim.sites(domain)
	if len(lics) != 1 || len(sites) != 1 {
		r.t.FailNow()
	}
	return lics[0], sites[0]
}

// wantAllSettled fails unless every record is completed (none processing,
// pending or failed) and the record id answered status; it returns that
// record.
func (r *faultRig) wantAllSettled(id uint64, status int) idempotency.Record {
	r.t.Helper()
	var recs []idempotency.Record
	if err := r.db.Gorm.Order("id").Find(&recs).Error; err != nil {
		r.t.Fatal(err)
	}
	var settled idempotency.Record
	for _, rec := range recs {
		if rec.Status != idempotency.StatusCompleted {
			r.t.Errorf("record %d (%s) is %s, want completed", rec.ID, rec.Operation, rec.Status)
		}
		if rec.ID == id {
			settled = rec
		}
	}
	if settled.ID != id {
		r.t.Fatalf("record %d is gone", id)
	}
	if settled.ResponseStatus == nil || *settled.ResponseStatus != status {
		r.t.Errorf("record %d stores status %v, want %d", id, settled.ResponseStatus, status)
	}
	return settled
}
