package webhooks

import (
	"context"
	"errors"
	"net/netip"
	"testing"
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
