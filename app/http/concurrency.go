package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
)

// errConcurrencyLimited answers a write whose consumer already has
// CONSUMER_CONCURRENCY writes in flight on this replica. Retry-After is a
// second: a write in flight usually ends well within it.
var errConcurrencyLimited = &Error{Status: http.StatusTooManyRequests, Message: "Too Many Concurrent Requests.",
	Code: "concurrency_limited", RetryAfter: 1}

// holdWrite takes one of p's consumer's write slots for the request, as
// Stripe's concurrent requests limiter does, and returns the function that
// gives it back when the request has ended. Every write counts while it is
// in flight (any method but GET, HEAD and OPTIONS; a replay of a stored
// answer too); reads take no slot. It is admit's last step (after
// authentication, the rate limit, the ability) and comes before the
// handler or the guard, so a refused write has read no body, reserved no
// idempotency record and called no vendor.
func (s *Server) holdWrite(c echo.Context, p auth.Principal) (release func(), err error) {
	switch c.Request().Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return func() {}, nil
	}
	release, ok := s.inFlight.Acquire(p.ConsumerID)
	if !ok {
		s.metrics.ObserveConcurrencyLimited()
		return nil, errConcurrencyLimited
	}
	return release, nil
}
