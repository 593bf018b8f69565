package web

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
)

func TestSameSite(t *testing.T) {
	for _, tc := range []struct {
		name, fetchSite, origin string
		want                    bool
	}{
		{"a browser's same-origin post", "same-origin", "https://console.test", true},
		{"same-origin behind a proxy that rewrites Host", "same-origin", "https://public.example", true},
		{"a cross-site post", "cross-site", "https://console.test", false},
		{"a same-site but other-origin post", "same-site", "https://console.test", false},
		{"an old browser, this origin", "", "https://console.test", true},
		{"an old browser, another origin", "", "https://evil.test", false},
		{"an opaque origin", "", "null", false},
		{"no browser headers: the CSRF token decides", "", "", true},
	} {
		r, _ := http.NewRequest(http.MethodPost, "https://console.test/console/logout", nil)
		if tc.fetchSite != "" {
			r.Header.Set("Sec-Fetch-Site", tc.fetchSite)
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if got := sameSite(r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestClientAddrCountsAnIPv6HostByItsBlock(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:5123":             "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:443": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":      "::ffff:192.0.2.7",
		"not an address":             "",
	} {
		req := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {"203.0.113.9"}}}
		if got := clientAddr(echo.New().NewContext(req, nil)); got != want {
			t.Errorf("clientAddr(%q) = %q, want %q", remote, got, want)
		}
	}
}

// A server that names no IPExtractor is taken at its peer: Echo's own
// fallback would believe X-Forwarded-For from anyone.
func TestClientAddrFollowsTheServersExtractor(t *testing.T) {
	e := echo.New()
	req := &http.Request{RemoteAddr: "192.0.2.7:5123", Header: http.Header{"X-Forwarded-For": {"203.0.113.9"}}}
	if got := clientAddr(e.NewContext(req, nil)); got != "192.0.2.7" {
		t.Errorf("no extractor: %q, want the peer", got)
	}
	e.IPExtractor = echo.ExtractIPFromXFFHeader() // trusts private peers
	req.RemoteAddr = "10.0.0.7:5123"
	if got := clientAddr(e.NewContext(req, nil)); got != "203.0.113.9" {
		t.Errorf("the server's extractor: %q, want what it says", got)
	}
}

func TestSafeNextStaysInTheConsole(t *testing.T) {
	for next, want := range map[string]string{
		"/console/intents?status=pending": "/console/intents?status=pending",
		"/console/":                       "/console/",
		"/console/../api/tokens":          "/console",
		"/console/intents/../../api":      "/console",
		"/console//evil.test":             "/console",
		"/console/login?next=/console":    "/console",
		"//evil.test/console":             "/console",
		"/consoleevil":                    "/console",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
