package tests

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The served application checks endpoints against WEBHOOK_PRIVATE_ALLOWLIST:
// a private address in a listed range is taken, one outside every range is
// a 422, the metadata service and loopback included.
func TestWebhookEndpointsInAPrivateAllowlist(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"), withConfig(func(c *config.Config) {
		c.Webhooks.AllowPrivate, c.Webhooks.RequireHTTPS = false, true
		c.Webhooks.PrivateAllowlist = []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24"), netip.MustParsePrefix("fd00:1::/64")}
	}))
	acme := a.hooks("acme")
	a.endpoint(acme, `{"url":"https://10.1.2.7/h"}`)
	a.endpoint(acme, `{"url":"https://[fd00:1::7]/h"}`)
	for _, u := range []string{"https://10.1.3.7/h", "https://[fd00:2::7]/h", "https://169.254.169.254/h", "https://127.0.0.1/h", "https://[::1]/h"} {
		r := a.do(http.MethodPost, "/api/webhook-endpoints", `{"url":"`+u+`"}`, acme...).wantStatus(http.StatusUnprocessableEntity)
		if !strings.Contains(r.Body.String(), "must resolve to public addresses only") {
			t.Errorf("%s: %s, want it refused as not public", u, r.Body.String())
		}
	}
}

// A production server's API answers /metrics 404 (documented), METRICS_ADDR
// set or not; the same server outside production serves them there.
func TestProductionKeepsMetricsOffTheAPI(t *testing.T) {
	for _, tc := range []struct {
		env, metricsAddr string
		want             int
	}{
		{config.EnvProduction, "", http.StatusNotFound},
		{config.EnvProduction, "127.0.0.1:9100", http.StatusNotFound},
		{config.EnvTesting, "", http.StatusOK},
	} {
		a := newApp(t, testdb.New(t, "sqlite"), withConfig(func(c *config.Config) { c.Env, c.MetricsAddr = tc.env, tc.metricsAddr }))
		a.do(http.MethodGet, "/metrics", "").wantStatus(tc.want)
	}
}
