package vendorclient_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
)

// TestNewHTTPNeedsItsConfiguration: the http driver without what it needs
// is an error naming the variable.
func TestNewHTTPNeedsItsConfiguration(t *testing.T) {
	for name, tt := range map[string]struct {
		cfg     config.Vendor
		wantErr string
	}{
		"without URL":            {config.Vendor{Driver: "http", Token: "t"}, "VENDOR_URL is required"},
		"with a URL not http(s)": {config.Vendor{Driver: "http", URL: "ftp://vendor.test", Token: "t"}, "VENDOR_URL"},
		"without token":          {config.Vendor{Driver: "http", URL: "https://vendor.test"}, "VENDOR_TOKEN is required"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := vendorclient.NewHTTP(tt.cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewHTTP = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
