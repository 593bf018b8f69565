package tests

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// keyWarningLine is what the log line that tells why requests answer 503
// key_unavailable says.
const keyWarningLine = "data sealed under a key this replica does not hold: check APP_KEY and APP_PREVIOUS_KEYS on every replica"

// Data written under key B, read by a replica that holds only key A (a
// rotation done out of order): every read of it (a license, the list, the
// replay of a stored answer, a duplicate webhook) answers 503
// key_unavailable with Retry-After, never a 500, and shows nothing of keys
// or values; the log tells the cause once a minute, not once a request. A
// keyed create that met such data is not stored as its answer: its key is
// given back, and its retry on a replica with the key runs for real. A
// replica holding B only as a previous key (the first step of the
// documented rotation) reads all of it, and takes tokens signed with B.
func TestKeyUnavailableAnswers503(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		writer := newApp(t, db, withKeys(otherKey), withWebhookSecrets(webhookSecret)) // B
		acmeB := writer.consumer("acme")
		first := writer.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acmeB, "sealed-b-1")...).wantStatus(http.StatusCreated)
		lic := first.licenseData()
		id, _ := lic["id"].(string)
		licenseKey, _ := lic["license_key"].(string)
		event := vendorEventBody("evt_sealed_b", "site.suspended", time.Now().Add(-time.Minute), lic["vendor_site_id"].(string), "")
		writer.webhook(event, signature(time.Now(), event, webhookSecret)).wantStatus(http.StatusOK)

		// Step 1 of the rotation: B held only as a previous key opens
		// everything B sealed, and verifies the tokens B signed.
		step1 := newApp(t, db, withKeys(testKey, otherKey))
		if got := step1.do(http.MethodGet, "/api/licenses/"+id, "", acmeB...).wantStatus(http.StatusOK).licenseData()["license_key"]; got != licenseKey {
			t.Errorf("B as a previous key: license_key %v, want %s", got, licenseKey)
		}
		if r := step1.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acmeB, "sealed-b-1")...).wantStatus(http.StatusCreated); !bytes.Equal(r.Body.Bytes(), first.Body.Bytes()) {
			t.Errorf("B as a previous key: replay %s, want %s", r.Body.String(), first.Body.String())
		}

		clk := testkit.NewClock(time.Now())
		old := newApp(t, db, withKeys(testKey), withClock(clk), withWebhookSecrets(webhookSecret)) // A alone
		acme := old.consumer("acme")
		refused := []*response{
			old.do(http.MethodGet, "/api/licenses/"+id, "", acme...),
			old.do(http.MethodGet, "/api/licenses/"+id, "", acme...),
			old.do(http.MethodGet, "/api/licenses", "", acme...),
			old.do(http.MethodGet, "/api/licenses?cursor=", "", acme...),
			old.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "sealed-b-1")...), // a replay of B's answer
			old.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acme, "sealed-b-2")...), // a new key for a domain B sealed
			old.webhook(event, signature(clk.Now(), event, webhookSecret)),                   // a duplicate event: its answer is B's
		}
		for _, r := range refused {
			r.wantError(http.StatusServiceUnavailable, "key_unavailable")
			if got := r.Header().Get("Retry-After"); got != "5" {
				t.Errorf("Retry-After = %q, want 5", got)
			}
			for _, leak := range []string{licenseKey, "crypt", "eyJpdiI6", "APP_KEY"} {
				if strings.Contains(r.Body.String(), leak) {
					t.Errorf("the answer shows %q: %s", leak, r.Body.String())
				}
			}
		}
		logs := old.logs.String()
		if n := strings.Count(logs, keyWarningLine); n != 1 {
			t.Errorf("after %d refused requests the log tells the cause %d times, want once:\n%s", len(refused), n, logs)
		}
		if strings.Contains(logs, `"msg":"internal error"`) || strings.Contains(logs, licenseKey) {
			t.Errorf("the log has an internal error or the license key:\n%s", logs)
		}
		if old.vendor.count("") != 0 {
			t.Errorf("the vendor was called %d times by requests that could not read their data", old.vendor.count(""))
		}

		// Nothing was lost: B's stored answer is as it was, and the refused
		// create's key was given back (its fingerprint kept), so its retry on a replica with the
		// key runs for real (the domain is the consumer's already: 200).
		if rec := old.record("sealed-b-1"); rec == nil || rec.Status != idempotency.StatusCompleted {
			t.Errorf("the record of B's answer is %+v, want it completed as it was", rec)
		}
		if rec := old.record("sealed-b-2"); rec == nil || rec.Status != "abandoned" || rec.ResponseStatus != nil {
			t.Errorf("the refused create's record is %+v, want its fingerprint alone kept (abandoned): its key given back", rec)
		}
		if r := writer.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acmeB, "sealed-b-1")...).wantStatus(http.StatusCreated); !bytes.Equal(r.Body.Bytes(), first.Body.Bytes()) ||
			r.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("B's replay after the refusals = %s, want the first answer replayed", r.Body.String())
		}
		writer.do(http.MethodPost, "/api/licenses", acmeBody, keyed(acmeB, "sealed-b-2")...).wantStatus(http.StatusOK)

		// A minute on, the cause is told again, with how many were refused.
		clk.Advance(time.Minute)
		old.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantError(http.StatusServiceUnavailable, "key_unavailable")
		logs = old.logs.String()
		if n := strings.Count(logs, keyWarningLine); n != 2 {
			t.Errorf("a minute later the log tells the cause %d times, want twice:\n%s", n, logs)
		}
		if !strings.Contains(logs, `"refused":1}`) || !strings.Contains(logs, `"refused":`+strconv.Itoa(len(refused))+`}`) {
			t.Errorf("the lines do not count the refused requests (1, then %d):\n%s", len(refused), logs)
		}
	})
}
