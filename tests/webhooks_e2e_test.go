package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// TestWebhookFromTheSimulator runs real processes: a site suspended, its key
// rotated, then deleted at vendor-sim reaches the license in licensor through
// the simulator's signed webhooks, each applied once although the simulator
// sends every event twice (--webhook-dup-rate 1).
func TestWebhookFromTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		const secret = "whsec_e2e"
		api := testkit.FreeAddr(t)
		r := newFaultRig(t, db, []string{"--webhook-url", "http://" + api + "/api/webhooks/vendor", "--webhook-secret", secret, "--webhook-dup-rate", "1"},
			"VENDOR_WEBHOOK_SECRET="+secret, "APP_ADDR="+api)
		sim, token := r.sim, r.token
		start(t, r.env, "serve")
		waitFor(t, "http://"+api+"/healthz", "", http.StatusOK)

		created := createLicense(t, "http://"+api, token)
		license := "http://" + api + "/api/licenses/" + created.ID
		shown := func() map[string]any {
			_, _, got := send(license, http.MethodGet, token, "", "")
			var l struct {
				Data map[string]any `json:"data"`
			}
			_ = json.Unmarshal([]byte(got), &l)
			return l.Data
		}
		sim.changeSite(created.VendorSiteID, "suspend")
		testkit.Eventually(t, 15*time.Second, func() bool { return shown()["status"] == "suspended" }, "the license suspended")
		sim.changeSite(created.VendorSiteID, "rotate")
		testkit.Eventually(t, 15*time.Second, func() bool { return shown()["license_key"] != created.LicenseKey }, "the license re-keyed")
		sim.changeSite(created.VendorSiteID, "delete")
		testkit.Eventually(t, 15*time.Second, func() bool { return shown()["status"] == "revoked" }, "the license revoked")

		_, _, events := send(license+"/events", http.MethodGet, token, "", "")
		for _, want := range []string{"suspended", "key_rotated", "revoked"} {
			if n := strings.Count(events, `"event":"`+want+`","actor":"vendor"`); n != 1 {
				t.Errorf("%d %s events by the vendor for two deliveries each, want 1: %s", n, want, events)
			}
		}
	})
}

// createLicense creates acme.test's license through the API at base.
func createLicense(t *testing.T, base, token string) apiLicense {
	t.Helper()
	code, _, body := send(base+"/api/licenses", http.MethodPost, token, "", acmeBody)
	created := decodeLicense(body)
	if code != http.StatusCreated || created.VendorSiteID == "" {
		t.Fatalf("create = %d %s", code, body)
	}
	return created
}
