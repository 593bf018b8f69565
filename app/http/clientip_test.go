package http

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	for _, tc := range []struct {
		name, peer, xff, realIP string
		trusted                 []netip.Prefix
		want                    string
	}{
		{"no proxy trusted: the peer", "192.0.2.1:5000", "198.51.100.7", "198.51.100.9", nil, "192.0.2.1"},
		{"an untrusted peer's header", "192.0.2.1:5000", "198.51.100.7", "", trusted, "192.0.2.1"},
		{"a private peer not named", "192.168.1.1:5000", "198.51.100.7", "", trusted[:1], "192.168.1.1"},
		{"a trusted proxy's", "10.0.0.2:5000", "198.51.100.7", "", trusted, "198.51.100.7"},
		{"two trusted hops, a spoofed entry", "10.0.0.2:5000", "6.6.6.6, 198.51.100.7, 10.0.0.3", "", trusted, "198.51.100.7"},
		{"X-Real-IP without X-Forwarded-For", "[2001:db8::5]:5000", "", "198.51.100.9", trusted, "198.51.100.9"},
		{"X-Real-IP from an untrusted peer", "192.0.2.1:5000", "", "198.51.100.9", trusted, "192.0.2.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if tc.realIP != "" {
				r.Header.Set("X-Real-IP", tc.realIP)
			}
			if got := clientIP(tc.trusted)(r); got != tc.want {
				t.Errorf("clientIP = %q, want %q", got, tc.want)
			}
		})
	}
}
