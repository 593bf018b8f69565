package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
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
		sim, api := freePort(t), freePort(t)
		const secret = "whsec_e2e"
		env := []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
			"APP_ENV=testing", "APP_KEY=base64:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"APP_ADDR=" + api, "APP_STORAGE=" + t.TempDir(), "LOG_FORMAT=json", "RATE_LIMIT_PER_MINUTE=0",
			"VENDOR_DRIVER=http", "VENDOR_URL=http://" + sim, "VENDOR_TOKEN=sim-token", "VENDOR_WEBHOOK_SECRET=" + secret,
		}
		if db.Dialect == database.MySQL {
			env = append(env, "DB_CONNECTION=mysql", "DB_URL="+db.Config.URL)
		} else {
			env = append(env, "DB_DATABASE="+db.Config.Database)
		}
		start(t, env, "vendor-sim", "--addr", sim, "--token", "sim-token",
			"--webhook-url", "http://"+api+"/api/webhooks/vendor", "--webhook-secret", secret, "--webhook-dup-rate", "1")
		waitForVendor(t, "http://"+sim+"/sites?domain=x.test", "sim-token")
		token := strings.TrimSpace(runCmd(t, env, "token", "issue", "--consumer", "acme", "--abilities", "licenses:read,licenses:write"))
		start(t, env, "serve")
		waitFor(t, "http://"+api+"/healthz", "", http.StatusOK)

		code, _, body := send("http://"+api+"/api/licenses", http.MethodPost, token, "order-hook", acmeBody)
		if code != http.StatusCreated {
			t.Fatalf("create = %d %s", code, body)
		}
		var created struct {
			Data struct {
				ID         string `json:"id"`
				Site       string `json:"vendor_site_id"`
				LicenseKey string `json:"license_key"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &created); err != nil || created.Data.Site == "" {
			t.Fatalf("create body %s: %v", body, err)
		}
		site, firstKey := created.Data.Site, created.Data.LicenseKey
		license := "http://" + api + "/api/licenses/" + created.Data.ID

		until := func(what string, ok func(map[string]any) bool) {
			t.Helper()
			deadline := time.Now().Add(15 * time.Second)
			for {
				_, _, got := send(license, http.MethodGet, token, "", "")
				var l struct {
					Data map[string]any `json:"data"`
				}
				_ = json.Unmarshal([]byte(got), &l)
				if ok(l.Data) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the license is still %s", what, got)
				}
				time.Sleep(20 * time.Millisecond) // polling a real process, with a deadline
			}
		}
		act := func(action string) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodPost, "http://"+sim+"/_sim/sites/"+site+"/"+action, nil)
			req.Header.Set("Authorization", "Bearer sim-token")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s at the simulator: %v %v", action, resp, err)
			}
			resp.Body.Close()
		}
		act("suspend")
		until("suspended", func(l map[string]any) bool { return l["status"] == "suspended" })
		act("rotate")
		until("key rotated", func(l map[string]any) bool { return l["license_key"] != firstKey && l["license_key"] != nil })
		act("delete")
		until("revoked", func(l map[string]any) bool { return l["status"] == "revoked" })

		_, _, events := send(license+"/events", http.MethodGet, token, "", "")
		for _, want := range []string{"suspended", "key_rotated", "revoked"} {
			if n := strings.Count(events, `"event":"`+want+`","actor":"vendor"`); n != 1 {
				t.Errorf("%d %s events by the vendor for two deliveries each, want 1: %s", n, want, events)
			}
		}
	})
}
