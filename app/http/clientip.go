package http

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/labstack/echo/v4"
)

// clientIP is the server's one rule for who a request came from, set as
// Echo's IPExtractor so that every c.RealIP() agrees (the access log's
// client, the console's sign-in limit): the connection's peer, unless the
// peer is one of the trusted proxies (TRUSTED_PROXIES, Laravel's
// TrustProxies). From a trusted proxy, X-Forwarded-For is read from the
// right, past every trusted hop, to the first address that is not one;
// without it, X-Real-IP. Loopback and private peers are trusted only when
// named: Echo trusts them by default, which would believe any header from
// a neighbour on the same network.
func clientIP(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	forwarded, realIP := echo.ExtractIPFromXFFHeader(opts...), echo.ExtractIPFromRealIPHeader(opts...)
	return func(r *http.Request) string {
		if len(r.Header.Values(echo.HeaderXForwardedFor)) > 0 {
			return forwarded(r)
		}
		return realIP(r)
	}
}
