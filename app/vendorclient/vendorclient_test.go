package vendorclient_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
)

// TestNewPicksTheDriver: VENDOR_DRIVER picks fake (the default) or http; an
// unknown driver, or http without what it needs, is an error naming it.
func TestNewPicksTheDriver(t *testing.T) {
	httpCfg := config.Vendor{Driver: "http", URL: "https://vendor.test/api/", Token: "t", Timeout: time.Second}
	tests := []struct {
		name    string
		cfg     config.Vendor
		want    string // the driver's type, or "" for an error
		wantErr string
	}{
		{"default is fake", config.Vendor{}, "*vendorclient.Fake", ""},
		{"fake", config.Vendor{Driver: "fake"}, "*vendorclient.Fake", ""},
		{"http", httpCfg, "*vendorclient.HTTPDriver", ""},
		{"unknown", config.Vendor{Driver: "x"}, "", `VENDOR_DRIVER "x" is not fake or http`},
		{"http without URL", config.Vendor{Driver: "http", Token: "t"}, "", "VENDOR_URL is required"},
		{"http with a URL that is not http", config.Vendor{Driver: "http", URL: "ftp://vendor.test", Token: "t"}, "", "VENDOR_URL"},
		{"http without token", config.Vendor{Driver: "http", URL: "https://vendor.test"}, "", "VENDOR_TOKEN is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := vendorclient.New(tt.cfg, slog.New(slog.DiscardHandler))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", v); got != tt.want {
				t.Errorf("New gave %s, want %s", got, tt.want)
			}
		})
	}
}

// TestNewWarnsThatTheFakeIsForDemos: the fake says so at start-up.
func TestNewWarnsThatTheFakeIsForDemos(t *testing.T) {
	var logs strings.Builder
	if _, err := vendorclient.New(config.Vendor{Driver: "fake"}, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "fake") || !strings.Contains(got, "demos") {
		t.Errorf("log = %q, want a warning that the fake is for demos", got)
	}
}
