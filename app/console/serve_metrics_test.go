package console

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/internal/testkit"
)

// get answers GET url's status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// In production /metrics is never on the API's address: on METRICS_ADDR
// when set, else not over HTTP (which serve logs). Elsewhere, without
// METRICS_ADDR, the API's address serves them, as it always has.
func TestProductionServesMetricsOnlyOnMetricsAddr(t *testing.T) {
	const family = "licensor_http_requests_total"
	for _, tc := range []struct {
		name        string
		env         string
		metricsAddr bool
		onAPI       int // /metrics' status on APP_ADDR
	}{
		{"production without METRICS_ADDR", "production", false, http.StatusNotFound},
		{"production with METRICS_ADDR", "production", true, http.StatusNotFound},
		{"testing without METRICS_ADDR", "testing", false, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			addr := testkit.FreeAddr(t)
			vars := map[string]string{"APP_ENV": tc.env, "APP_ADDR": addr, "APP_URL": "http://" + addr, "VENDOR_ALLOW_FAKE": "true",
				"APP_KEY": testKey}
			metricsAddr := ""
			if tc.metricsAddr {
				metricsAddr = testkit.FreeAddr(t)
				vars["METRICS_ADDR"] = metricsAddr
			}
			stderr := &testkit.Buffer{}
			stop := startServe(t, addr, getenvOf(vars), stderr)
			defer func() {
				if err := stop(); err != nil {
					t.Errorf("serve: %v", err)
				}
			}()

			status, body := get(t, "http://"+addr+"/metrics")
			if status != tc.onAPI || (status == http.StatusOK) != strings.Contains(body, family) {
				t.Errorf("GET /metrics on APP_ADDR = %d, %d bytes; want %d", status, len(body), tc.onAPI)
			}
			if metricsAddr != "" {
				if status, body := get(t, "http://"+metricsAddr+"/metrics"); status != http.StatusOK || !strings.Contains(body, family) {
					t.Errorf("GET /metrics on METRICS_ADDR = %d, want 200 with %s", status, family)
				}
			}
			said := strings.Contains(stderr.String(), "metrics not served over HTTP")
			if want := tc.env == "production" && !tc.metricsAddr; said != want {
				t.Errorf("the log says metrics are not served: %v, want %v\n%s", said, want, stderr.String())
			}
		})
	}
}
