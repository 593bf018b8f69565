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

// TestDriftCaughtByServeAndFixedByTheCommand runs real processes: a site
// deleted at vendor-sim with no webhook sent is caught by serve's drift loop
// (licensor_drift_mismatches{kind="site_gone"} 1 on /metrics), and
// `licensor drift --fix` revokes the license.
func TestDriftCaughtByServeAndFixedByTheCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	db := testdb.New(t, database.SQLite)
	sim, api := freePort(t), freePort(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"APP_ENV=testing", "APP_KEY=base64:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"APP_ADDR=" + api, "APP_STORAGE=" + t.TempDir(), "LOG_FORMAT=json", "RATE_LIMIT_PER_MINUTE=0",
		"VENDOR_DRIVER=http", "VENDOR_URL=http://" + sim, "VENDOR_TOKEN=sim-token", "DRIFT_INTERVAL=100ms",
		"DB_DATABASE=" + db.Config.Database,
	}
	start(t, env, "vendor-sim", "--addr", sim, "--token", "sim-token")
	waitForVendor(t, "http://"+sim+"/sites?domain=x.test", "sim-token")
	token := strings.TrimSpace(runCmd(t, env, "token", "issue", "--consumer", "acme", "--abilities", "licenses:read,licenses:write"))
	start(t, env, "serve")
	waitFor(t, "http://"+api+"/healthz", "", http.StatusOK)

	code, _, body := send("http://"+api+"/api/licenses", http.MethodPost, token, "", acmeBody)
	var created struct {
		Data struct {
			ID   string `json:"id"`
			Site string `json:"vendor_site_id"`
		} `json:"data"`
	}
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &created) != nil {
		t.Fatalf("create = %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+sim+"/_sim/sites/"+created.Data.Site+"/delete", nil)
	req.Header.Set("Authorization", "Bearer sim-token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("delete at the simulator: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	const want = `licensor_drift_mismatches{kind="site_gone"} 1`
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) { // polling a real process
		_, _, metrics := send("http://"+api+"/metrics", http.MethodGet, "", "", "")
		if strings.Contains(metrics, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %s", want)
		}
	}
	out := runCmd(t, env, "drift", "--fix")
	if !strings.Contains(out, "site_gone\tlicense "+created.Data.ID) || !strings.Contains(out, "fixed") {
		t.Fatalf("drift --fix printed %q", out)
	}
	_, _, shown := send("http://"+api+"/api/licenses/"+created.Data.ID, http.MethodGet, token, "", "")
	if !strings.Contains(shown, `"status":"revoked"`) {
		t.Errorf("after drift --fix the license is %s", shown)
	}
	if out := runCmd(t, env, "drift"); !strings.Contains(out, "0 mismatch(es)") {
		t.Errorf("a second check found %q", out)
	}
}
