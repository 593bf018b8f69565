package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Policy is where webhooks may go: which URLs an endpoint may have, and
// which addresses a delivery may connect to. The address rule is checked
// twice: when the URL is given (every address its host resolves to), and
// on every connection a delivery makes (the address actually dialled), so
// that a name re-pointed at an internal address after it was registered
// (DNS rebinding) is refused too. Deliveries never follow a redirect.
type Policy struct {
	// AllowPrivate lets endpoints be loopback, private, link-local and the
	// like (WEBHOOK_ALLOW_PRIVATE): local work and tests.
	AllowPrivate bool
	// PrivateAllowlist are non-public ranges endpoints may reach all the
	// same (WEBHOOK_PRIVATE_ALLOWLIST): a network of the operator's own.
	// Every other non-public address stays refused.
	PrivateAllowlist []netip.Prefix
	// RequireHTTPS refuses http:// URLs (production).
	RequireHTTPS bool
	// Resolve looks a host name up; nil: the system resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// notPublicURL is the validation message of a URL whose host does not
// resolve, or resolves to an address that is not public.
const notPublicURL = "The url field's host must resolve to public addresses only."

// ErrAddressNotAllowed is a connection refused by the policy: its address is
// loopback, private, link-local or otherwise not public.
var ErrAddressNotAllowed = errors.New("the address is not a public one")

// addressError is a connection the policy refused, naming the address for
// the operator's log (the consumer is shown the class alone):
// errors.Is(err, ErrAddressNotAllowed).
type addressError struct{ addr string }

func (e *addressError) Error() string { return fmt.Sprintf("%s: %s", ErrAddressNotAllowed, e.addr) }

func (e *addressError) Is(target error) bool { return target == ErrAddressNotAllowed }

// notPublic are the ranges no endpoint may reach unless AllowPrivate, beside
// what netip classifies (loopback, private, link-local, multicast,
// unspecified): "this network", carrier-grade NAT, IETF protocol
// assignments, benchmarking, and the reserved and broadcast block.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relays
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
	// IPv6 forms that carry an IPv4 address, which may be any of the above:
	netip.MustParsePrefix("::/96"),          // IPv4-compatible
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2002::/16"),      // 6to4
	netip.MustParsePrefix("2001::/32"),      // Teredo
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated, still routed inside some networks)
}

// Allowed reports whether a delivery may connect to a: a public address,
// or one in PrivateAllowlist.
func (p Policy) Allowed(a netip.Addr) bool {
	if p.AllowPrivate {
		return true
	}
	// ::ffff:127.0.0.1 is 127.0.0.1; a zone (fec0::1%eth0) is dropped, or no
	// prefix below would contain the address (Prefix.Contains is false for
	// any zoned address), and the kernel ignores it off link-local.
	a = a.Unmap().WithZone("")
	for _, allowed := range p.PrivateAllowlist {
		if allowed.Contains(a) {
			return true
		}
	}
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// URLProblem says what is wrong with raw as an endpoint's URL, in words a
// consumer can act on (a validation message); "" when nothing is.
func (p Policy) URLProblem(ctx context.Context, raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || !u.IsAbs():
		return "The url field must be a valid URL."
	case u.Scheme != "https" && (p.RequireHTTPS || u.Scheme != "http"):
		if p.RequireHTTPS {
			return "The url field must start with https://."
		}
		return "The url field must start with http:// or https://."
	case u.User != nil:
		return "The url field must not carry a user name or password."
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "The url field must not have a fragment."
	}
	if p.AllowPrivate {
		return ""
	}
	// One answer whether the name does not resolve or resolves to an
	// address that is not public: what licensor's resolver knows of
	// internal names (and their addresses) is not told.
	addrs, err := p.lookup(ctx, u.Hostname())
	if err != nil || len(addrs) == 0 {
		return notPublicURL
	}
	for _, a := range addrs {
		if !p.Allowed(a) {
			return notPublicURL
		}
	}
	return ""
}

// lookup resolves host (an address literal is itself).
func (p Policy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if p.Resolve != nil {
		return p.Resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// Client is the HTTP client of deliveries: every attempt bounded by
// timeout, no redirect followed (a 3xx is the answer, and not a 2xx), no
// proxy from the environment (it would connect on the delivery's behalf,
// past the address check), no cookies, and every connection's address
// checked by the policy after resolution.
func (p Policy) Client(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &addressError{address}
			}
			if !p.Allowed(ap.Addr()) {
				return &addressError{ap.Addr().Unmap().String()}
			}
			return nil
		},
	}
	resolve := p.Resolve
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if resolve == nil {
				return dialer.DialContext(ctx, network, addr)
			}
			// A resolver of the caller's (tests): dial what it answers, each
			// address checked by the dialer's Control all the same.
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			addrs, err := p.lookup(ctx, host)
			if err != nil || len(addrs) == 0 {
				return nil, notResolved(host, err)
			}
			var errs []error
			for _, a := range addrs {
				c, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
				if err == nil {
					return c, nil
				}
				errs = append(errs, err)
			}
			return nil, errors.Join(errs...)
		},
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Timeout:   timeout,
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// notResolved is a failed lookup of the caller's resolver as the system
// resolver reports one, a *net.DNSError, so that a delivery's failure reads
// the same whichever resolved.
func notResolved(host string, err error) error {
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return err
	case err == nil:
		return &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return &net.DNSError{Err: err.Error(), Name: host}
}
