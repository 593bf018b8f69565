package webhooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// The address rule refuses the IPv6 forms that carry an IPv4 address (which
// may be a private one), the documentation and relay ranges, and the
// deprecated site-local one, beside what netip classifies; a URL whose host
// is refused, or does not resolve, gets one message that names no address.
func TestPolicyRefusesWhatIsNotPublic(t *testing.T) {
	p := Policy{}
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "::ffff:10.0.0.1", "::a00:1", "64:ff9b::a00:1",
		"64:ff9b:1::a00:1", "2002:a00:1::", "2001:0:a00:1::", "fec0::1", "100::1", "2001:db8::1", "192.0.2.1", "192.88.99.1",
		"198.51.100.1", "203.0.113.1", "100.64.0.1", "0.1.2.3", "240.0.0.1", "255.255.255.255", "fe80::1", "fd00::1", "ff02::1",
		"64:ff9b::a9fe:a9fe%eth0", "fec0::1%lo", "2002:7f00:1::%x"} { // a zone hides no address
		if p.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("Allowed(%s) = true, want it refused", a)
		}
	}
	for _, a := range []string{"93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"} {
		if !p.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("Allowed(%s) = false, want it public", a)
		}
	}
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "internal.example" {
			return []netip.Addr{netip.MustParseAddr("10.9.8.7")}, nil
		}
		return nil, errors.New("no such host")
	}
	p.Resolve = resolve
	for _, u := range []string{"https://internal.example/h", "https://missing.example/h"} {
		if msg := p.URLProblem(context.Background(), u); msg != notPublicURL {
			t.Errorf("URLProblem(%s) = %q, want %q", u, msg, notPublicURL)
		}
	}
}

// WEBHOOK_PRIVATE_ALLOWLIST: an address in a listed range passes, when its
// URL is given and when a delivery connects; a non-public one outside every
// range is refused as before, the metadata service and loopback included
// unless a range names them.
func TestPolicyPrivateAllowlist(t *testing.T) {
	prefixes := func(ps ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ps {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	p := Policy{PrivateAllowlist: prefixes("10.1.2.0/24", "fd00:1::/64")}
	for a, want := range map[string]bool{
		"10.1.2.7": true, "::ffff:10.1.2.7": true, "fd00:1::5": true, "1.1.1.1": true,
		"10.1.3.7": false, "fd00:2::5": false, "192.168.1.1": false, "169.254.169.254": false, "127.0.0.1": false, "::1": false,
	} {
		if got := p.Allowed(netip.MustParseAddr(a)); got != want {
			t.Errorf("allowlist %v: Allowed(%s) = %v, want %v", p.PrivateAllowlist, a, got, want)
		}
	}
	listed := Policy{PrivateAllowlist: prefixes("169.254.169.254/32", "127.0.0.0/8", "::1/128")}
	for _, a := range []string{"169.254.169.254", "127.0.0.1", "::1"} {
		if !listed.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("allowlist %v: Allowed(%s) = false, want it allowed", listed.PrivateAllowlist, a)
		}
	}
	if listed.Allowed(netip.MustParseAddr("169.254.169.253")) {
		t.Error("169.254.169.253 allowed by 169.254.169.254/32")
	}

	// When the URL is given: every address its host resolves to must pass.
	names := map[string][]string{"in.example": {"10.1.2.7"}, "out.example": {"10.1.3.7"}, "both.example": {"10.1.2.7", "10.1.3.7"}}
	p.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range names[host] {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
	for u, want := range map[string]string{"https://in.example/h": "", "https://10.1.2.9/h": "", "https://out.example/h": notPublicURL,
		"https://both.example/h": notPublicURL, "https://169.254.169.254/h": notPublicURL, "https://127.0.0.1/h": notPublicURL} {
		if got := p.URLProblem(context.Background(), u); got != want {
			t.Errorf("URLProblem(%s) = %q, want %q", u, got, want)
		}
	}

	// When a delivery connects: a receiver on 127.0.0.1 is reached only
	// with loopback listed.
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		allow  []netip.Prefix
		reach  bool
		reason string
	}{
		{prefixes("127.0.0.1/32"), true, "loopback listed"},
		{prefixes("10.0.0.0/8", "::1/128"), false, "loopback not listed"},
		{nil, false, "no allowlist"},
	} {
		resp, err := Policy{PrivateAllowlist: tc.allow}.Client(5*time.Second).Post(srv.URL, "application/json", nil)
		if err == nil {
			_ = resp.Body.Close()
		}
		if reached := err == nil; reached != tc.reach || (!tc.reach && !errors.Is(err, ErrAddressNotAllowed)) {
			t.Errorf("%s: POST to %s: %v, want reached %v (else refused by the policy)", tc.reason, srv.URL, err, tc.reach)
		}
	}
}
