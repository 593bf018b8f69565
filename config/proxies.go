package config

import (
	"net/netip"
	"strings"
)

// trustedProxies reads Laravel's TrustProxies: addresses and ranges. "*"
// (Laravel's trust every proxy) is refused: it believes a header any client
// writes whenever licensor is reached without the proxy; a deployment that
// means it names 0.0.0.0/0,::/0.
func (v *values) trustedProxies(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range strings.Split(v.str(name, ""), ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if s == "*" || s == "**" {
			v.fail(name, "%q is refused: name the proxies' addresses or ranges (e.g. 10.0.0.0/8); "+
				"0.0.0.0/0,::/0 believes every peer, if that is truly meant", s)
			continue
		}
		p, err := parseProxy(s)
		if err != nil {
			v.fail(name, "%q is not an IP address or a CIDR range (e.g. 10.0.0.5 or 10.0.0.0/8)", s)
			continue
		}
		out = append(out, p)
	}
	return out
}

// parseProxy reads an address (its own /32 or /128) or a range; an IPv4
// address written as IPv6 (::ffff:10.0.0.5) is the IPv4 one.
func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
