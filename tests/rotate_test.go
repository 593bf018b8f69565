package tests

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// rotatePath is the rotation route of the license with that id.
func rotatePath(id string) string { return "/api/licenses/" + id + "/rotate-key" }

// key is the license key GET shows for the license.
func (a *app) key(token []string, id string) string {
	a.t.Helper()
	return a.do(http.MethodGet, "/api/licenses/"+id, "", token...).wantStatus(http.StatusOK).licenseData()["license_key"].(string)
}

// rotating is an app whose consumer acme (its token) holds a license for
// acme.test: its id and its key.
func rotating(t *testing.T, db *testdb.DB, opts ...option) (a *app, acme []string, id, leaked string) {
	a = newApp(t, db, opts...)
	acme = a.consumer("acme")
	id = a.create(acme, "acme.test")
	return a, acme, id, a.key(acme, id)
}

// A consumer rotates a leaked key: one vendor call, 200 with the license and
// its new key, which GET shows; a retry with the key replays the answer byte
// for byte without asking the vendor again; the key sent for another license
// is refused; the change is in the feed and in the license's audit trail.
func TestRotateLicenseKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a, acme, id, leaked := rotating(t, db)
		other := a.create(acme, "other.test")
		calls := a.vendor.count("POST")

		r := a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-1")...).wantStatus(http.StatusOK)
		d := r.licenseData()
		if d["id"] != id || d["license_key"] == leaked || d["license_key"] == "" || d["status"] != "active" {
			t.Fatalf("rotated license = %v, leaked key %q", d, leaked)
		}
		if got := a.key(acme, id); got != d["license_key"] {
			t.Errorf("GET shows key %q, the rotation answered %q", got, d["license_key"])
		}
		a.wantVendorCalls("POST", calls+1)

		again := a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-1")...).wantStatus(http.StatusOK)
		if again.Body.String() != r.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry = %s (replayed %q), want the first answer replayed:\n%s", again.Body, again.Header().Get("Idempotent-Replayed"), r.Body)
		}
		a.wantVendorCalls("POST", calls+1)
		a.do(http.MethodPost, rotatePath(other), "", keyed(acme, "rot-1")...).wantStatus(http.StatusUnprocessableEntity)
		a.wantVendorCalls("POST", calls+1)

		a.dispatch()
		evs := a.feed(acme, "type=license.key_rotated").events(t)
		if len(evs) != 1 || evs[0].Data.License.ID != id || evs[0].Sequence != 2 {
			t.Errorf("feed's key_rotated events = %+v, want one for %s, sequence 2", evs, id)
		}
		trail := a.do(http.MethodGet, "/api/licenses/"+id+"/events", "", acme...).wantStatus(http.StatusOK).json()["data"].([]any)
		last := trail[len(trail)-1].(map[string]any)
		if len(trail) != 2 || last["event"] != "key_rotated" || last["actor"] != "request" || last["token_id"] == nil {
			t.Errorf("audit trail = %v, want created then key_rotated by the request", trail)
		}
	})
}

// Without a key a rotation runs each time; anyone else's license (or none)
// is 404 and a revoked one 409, both before the vendor hears of it; a token
// that may only read is 403.
func TestRotateLicenseKeyRefusals(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme, globex := a.consumer("acme"), a.consumer("globex")
		id, revoked := a.create(acme, "acme.test"), a.create(acme, "revoked.test")
		a.do(http.MethodDelete, "/api/licenses/"+revoked, "", acme...).wantStatus(http.StatusNoContent)
		first := a.do(http.MethodPost, rotatePath(id), "", acme...).wantStatus(http.StatusOK).licenseData()["license_key"]
		if second := a.do(http.MethodPost, rotatePath(id), "", acme...).wantStatus(http.StatusOK).licenseData()["license_key"]; second == first {
			t.Errorf("a second rotation without a key kept key %v", first)
		}
		calls := a.vendor.count("")

		a.do(http.MethodPost, rotatePath(id), "", globex...).wantStatus(http.StatusNotFound)
		a.do(http.MethodPost, rotatePath("01JNOSUCHLICENSE0000000000"), "", acme...).wantStatus(http.StatusNotFound)
		a.do(http.MethodPost, rotatePath(revoked), "", keyed(acme, "rot-revoked")...).wantError(http.StatusConflict, "license_not_active")
		a.do(http.MethodPost, rotatePath(id), "", bearer(a.token("acme", auth.LicensesRead))...).wantStatus(http.StatusForbidden)
		a.do(http.MethodPost, rotatePath(revoked), "", keyed(acme, "rot-revoked")...).wantError(http.StatusConflict, "license_not_active")
		a.wantVendorCalls("", calls)
	})
}

// The vendor rotates the key and its answer is lost: 202, and the
// reconciler reads the site, finds the new key and records it with its
// event; the retry then replays the stored 200.
func TestRotateLicenseKeyAnswerLost(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a, acme, id, leaked := rotating(t, db, withClock(testkit.NewClock(time.Now())))
		a.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
		a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-lost")...).wantError(http.StatusAccepted, "operation_pending")
		if a.key(acme, id) != leaked {
			t.Fatal("the license changed before its rotation was known")
		}
		calls := a.vendor.count("POST")

		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want completed", got)
		}
		a.wantVendorCalls("POST", calls) // read, never rotated again
		a.vendor.mu.Lock()
		atVendor := a.vendor.sites["acme.test"].LicenseKey
		a.vendor.mu.Unlock()
		if got := a.key(acme, id); got != atVendor || got == leaked {
			t.Errorf("key after reconciliation = %q, the vendor holds %q (leaked %q)", got, atVendor, leaked)
		}
		r := a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-lost")...).wantStatus(http.StatusOK)
		if r.Header().Get("Idempotent-Replayed") != "true" || r.licenseData()["license_key"] != atVendor {
			t.Errorf("retry after reconciliation = %s (replayed %q)", r.Body, r.Header().Get("Idempotent-Replayed"))
		}
		trail := a.do(http.MethodGet, "/api/licenses/"+id+"/events", "", acme...).json()["data"].([]any)
		if last := trail[len(trail)-1].(map[string]any); len(trail) != 2 || last["event"] != "key_rotated" || last["actor"] != "reconciler" {
			t.Errorf("audit trail = %v, want key_rotated by the reconciler", trail)
		}
	})
}

// The vendor fails the rotation without applying it: 202; the reconciler
// waits out the settle time, then rotates once and finishes the intent.
func TestRotateLicenseKeyNeverApplied(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a, acme, id, leaked := rotating(t, db, withClock(clk))
		a.vendor.script("POST", reply{status: 500, body: `{}`})
		a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-never")...).wantError(http.StatusAccepted, "operation_pending")
		calls := a.vendor.count("POST")

		r := a.reconciler()
		if got := results(a.reconcileOnce(r)); got != "waiting" {
			t.Fatalf("young record: results %q, want waiting", got)
		}
		a.wantVendorCalls("POST", calls)
		clk.Advance(settle + time.Second)
		if got := results(a.reconcileOnce(r)); got != "completed" {
			t.Fatalf("settled record: results %q, want completed", got)
		}
		a.wantVendorCalls("POST", calls+1)
		if a.key(acme, id) == leaked {
			t.Error("the license keeps its leaked key")
		}
		if rec := a.record("rot-never"); rec.Status != idempotency.StatusCompleted || *rec.ResponseStatus != http.StatusOK {
			t.Errorf("record = %s %v", rec.Status, *rec.ResponseStatus)
		}
	})
}

// The vendor cannot be reached: 503 with its Retry-After, the license keeps
// its key, and a retry with the same key runs for real.
func TestRotateLicenseKeyVendorUnavailable(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a, acme, id, leaked := rotating(t, db)
		busy := reply{status: 429, body: `{}`, header: map[string]string{"Retry-After": "7"}}
		a.vendor.script("POST", busy, busy, busy, busy, busy, busy)
		r := a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-down")...)
		r.wantError(http.StatusServiceUnavailable, "vendor_unavailable")
		if r.Header().Get("Retry-After") != "7" {
			t.Errorf("Retry-After = %q, want the vendor's 7", r.Header().Get("Retry-After"))
		}
		if a.key(acme, id) != leaked {
			t.Fatal("the key changed though the vendor was never reached")
		}
		a.vendor.mu.Lock()
		a.vendor.queued["POST"] = nil
		a.vendor.mu.Unlock()
		again := a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-down")...).wantStatus(http.StatusOK)
		if again.Header().Get("Idempotent-Replayed") != "" || again.licenseData()["license_key"] == leaked {
			t.Errorf("retry = %s (replayed %q), want a rotation", again.Body, again.Header().Get("Idempotent-Replayed"))
		}
	})
}

// The license page's "Rotate key" runs the API's operation for the
// license's consumer, by the session's token: without its form token
// nothing happens; with it the vendor rotates once, the page shows the new
// key's tail and the trail the rotation; the same form sent again replays
// it. A revoked license offers no button, and its post is the 409 page.
func TestConsoleRotatesALicenseKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a, acme, id, leaked := rotating(t, db)
		revoked := a.create(acme, "revoked.test")
		a.do(http.MethodDelete, "/api/licenses/"+revoked, "", acme...).wantStatus(http.StatusNoContent)
		ops := a.issued("ops", auth.IntentsManage)
		b := newConsoleClient(t, a)
		b.signIn(ops.Secret)
		page := b.get("/console/licenses/"+id).wantStatus(t, http.StatusOK, `action="/console/licenses/`+id+`/rotate-key"`, "Rotate key")
		form := url.Values{"once": {onceInput.FindStringSubmatch(page.Body)[1]}}
		calls := a.vendor.count("POST")

		b.post("/console/licenses/"+id+"/rotate-key", url.Values{"_token": {""}, "once": form["once"]}).wantStatus(t, 419, "Page Expired")
		a.wantVendorCalls("POST", calls)
		for range 2 { // the form sent again: replayed, not rotated twice
			p := b.post("/console/licenses/"+id+"/rotate-key", form, "X-Request-Id", "req-console-rotate")
			if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/licenses/"+id+"?done=rotated" {
				t.Fatalf("rotate: %d to %q: %.2000s", p.Status, p.Header.Get("Location"), p.Body)
			}
		}
		a.wantVendorCalls("POST", calls+1)
		key := a.key(acme, id)
		if key == leaked {
			t.Fatal("the console's rotation left the leaked key")
		}
		b.get("/console/licenses/"+id+"?done=rotated").wantStatus(t, http.StatusOK, "Key rotated", `<span class="mono">…`+key[len(key)-4:]+`</span>`,
			"<td>key_rotated</td>", ops.ID, "req-console-rotate", "<td>license.key_rotated</td>")

		p := b.get("/console/licenses/" + revoked)
		if p.Status != http.StatusOK || onceInput.MatchString(p.Body) {
			t.Errorf("a revoked license's page offers a rotation (status %d)", p.Status)
		}
		b.post("/console/licenses/"+revoked+"/rotate-key", url.Values{"once": {"a-form"}}).wantStatus(t, http.StatusConflict, "revoked")
	})
}

// The vendor applies the rotation and the answer is lost (202), and the
// vendor's own site.key_rotated webhook records the new key before the
// reconciler looks: the key the license took since the intent began is the
// rotation's. The reconciler records it and never rotates a second time,
// so the consumer hears of one new key, not of two.
func TestRotateLicenseKeyToldByTheVendorFirst(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a, acme, id, leaked := rotating(t, db, withClock(clk), withWebhookSecrets(webhookSecret))
		a.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
		a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-told")...).wantError(http.StatusAccepted, "operation_pending")
		calls := a.vendor.count("POST")
		a.vendor.mu.Lock()
		site := a.vendor.sites["acme.test"]
		a.vendor.mu.Unlock()
		if site.LicenseKey == leaked {
			t.Fatal("the vendor did not apply the rotation")
		}
		body := vendorEventBody("evt_rotated", "site.key_rotated", clk.Now(), site.ID, site.LicenseKey)
		a.webhook(body, signature(clk.Now(), body, webhookSecret)).wantStatus(http.StatusOK)
		if got := a.key(acme, id); got != site.LicenseKey {
			t.Fatalf("after the vendor's webhook the key is %q, want %q", got, site.LicenseKey)
		}

		clk.Advance(settle + time.Second) // the reconciler may rotate again from here, if it must
		if got := results(a.reconcileOnce(a.reconciler())); got != "completed" {
			t.Fatalf("reconcile results = %q, want completed", got)
		}
		a.wantVendorCalls("POST", calls)
		if got := a.key(acme, id); got != site.LicenseKey {
			t.Errorf("key after reconciliation = %q, want the vendor's %q", got, site.LicenseKey)
		}
		r := a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-told")...).wantStatus(http.StatusOK)
		if r.Header().Get("Idempotent-Replayed") != "true" || r.licenseData()["license_key"] != site.LicenseKey {
			t.Errorf("retry after reconciliation = %s (replayed %q)", r.Body, r.Header().Get("Idempotent-Replayed"))
		}
		if names := a.licenseEventNames(acme, id); countOf(names, "key_rotated by vendor")+countOf(names, "key_rotated by reconciler") != 1 {
			t.Errorf("audit trail = %v, want one key_rotated", names)
		}
	})
}

// A rotation whose answer was lost and which the reconciler gave up on
// (failed) is taken over by the client's retry with its key: the retry
// looks at the vendor first, finds the rotation applied, and records it —
// it never sends the rotation a second time.
func TestRotateLicenseKeyRetryAfterFailureLooksFirst(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a, acme, id, leaked := rotating(t, db)
		a.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
		a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-failed")...).wantError(http.StatusAccepted, "operation_pending")
		calls := a.vendor.count("POST")
		// What the reconciler leaves when it gives up: failed, past Start, no lease.
		if err := a.db.Gorm.Model(&idempotency.Record{}).Where("idempotency_key = ?", "rot-failed").
			Updates(map[string]any{"status": idempotency.StatusFailed, "locked_until": nil}).Error; err != nil {
			t.Fatal(err)
		}

		r := a.do(http.MethodPost, rotatePath(id), "", keyed(acme, "rot-failed")...).wantStatus(http.StatusOK)
		a.wantVendorCalls("POST", calls)
		a.vendor.mu.Lock()
		atVendor := a.vendor.sites["acme.test"].LicenseKey
		a.vendor.mu.Unlock()
		if got := r.licenseData()["license_key"]; got != atVendor || got == leaked {
			t.Errorf("the retry answered key %v, the vendor holds %q (leaked %q)", got, atVendor, leaked)
		}
		if got := a.key(acme, id); got != atVendor {
			t.Errorf("key = %q, want the vendor's %q", got, atVendor)
		}
	})
}
