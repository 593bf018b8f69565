package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
)

// TestNewVendorPicksTheDriver: VENDOR_DRIVER picks fake (the default) or
// http, either with the options given; an unknown driver, or http without
// what it needs (a URL, an http(s) one, a token), is an error naming it. The fake is the http driver on the
// simulator served in this process: it makes a site with no vendor to
// reach, and warns that it is for demos.
func TestNewVendorPicksTheDriver(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"data":{"id":"site_1","license_key":"LK-1"}}`)
	}))
	defer srv.Close()
	for _, cfg := range []config.Vendor{{}, {Driver: "fake"}, {Driver: "http", URL: srv.URL, Token: "t"}} {
		var logs strings.Builder
		var observed []string
		v, err := newVendor(cfg, slog.New(slog.NewTextHandler(&logs, nil)),
			vendorclient.WithObserver(func(call string, status int) { observed = append(observed, fmt.Sprint(call, " ", status)) }, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := v.(*vendorclient.HTTPDriver); !ok {
			t.Errorf("driver %q: %T, want the http driver", cfg.Driver, v)
		}
		if site, err := v.CreateSite(context.Background(), "Acme", "acme.test"); err != nil || site.LicenseKey == "" {
			t.Errorf("driver %q: CreateSite = %+v, %v; want a site", cfg.Driver, site, err)
		}
		if !slices.Equal(observed, []string{"create 201"}) {
			t.Errorf("driver %q: observed %q, want the create: the options reach the driver", cfg.Driver, observed)
		}
		fake := cfg.Driver != "http"
		if got := logs.String(); fake != (strings.Contains(got, "level=WARN") && strings.Contains(got, "fake") && strings.Contains(got, "demos")) {
			t.Errorf("driver %q: log = %q; want a warning that the fake is for demos, for the fake alone", cfg.Driver, got)
		}
	}
	for _, bad := range []struct {
		cfg  config.Vendor
		want string
	}{
		{config.Vendor{Driver: "x"}, `VENDOR_DRIVER "x" is not fake or http`},
		{config.Vendor{Driver: "http", Token: "t"}, "VENDOR_URL is required"},
		{config.Vendor{Driver: "http", URL: "ftp://vendor.test", Token: "t"}, `VENDOR_URL "ftp://vendor.test" is not an http(s) URL`},
		{config.Vendor{Driver: "http", URL: "https://vendor.test"}, "VENDOR_TOKEN is required"},
	} {
		if v, err := newVendor(bad.cfg, slog.New(slog.DiscardHandler)); v != nil || err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, %v; want an error containing %q", bad.cfg, v, err, bad.want)
		}
	}
}
