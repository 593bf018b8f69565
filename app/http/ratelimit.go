package http

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
)

// The rate limit headers, spelled as Laravel sends them. They are written
// with setExact, never http.Header.Set, which would canonicalise them to
// X-Ratelimit-*: a client reading headers case-sensitively (a JS front end's
// fetch Headers is case-insensitive, but proxies' and some SDKs' maps are
// not) must see Laravel's spelling on the wire.
const (
	headerRateLimitLimit     = "X-RateLimit-Limit"
	headerRateLimitRemaining = "X-RateLimit-Remaining"
	headerRateLimitReset     = "X-RateLimit-Reset" // on a 429 only, with Retry-After
)

// throttle is Laravel's `throttle:api`, per consumer: it counts the
// authenticated request and sets X-RateLimit-Limit and X-RateLimit-Remaining
// on the response before anything else may write it, so that every answer
// after authentication carries them, errors included. Over the limit it
// returns the 429 (with Retry-After and X-RateLimit-Reset).
//
// A request the shared store could not count (Redis down or slow, a
// database statement failing) is counted by this replica alone, against
// its share of the limit, with the same headers and 429s (the limiter logs
// it, once a minute at most, and counts it in the metrics): it is never
// served without a limit. When the database is unavailable in general,
// which the request would meet anyway, that error is returned, a 503.
func (s *Server) throttle(c echo.Context, p auth.Principal) error {
	if s.limiter == nil {
		return nil
	}
	now := s.now()
	res, err := s.limiter.Take(c.Request().Context(), p.ConsumerID, now)
	if err != nil {
		return err
	}
	if res.Limit == 0 { // the limiter is off: no headers, as Laravel without a limiter
		return nil
	}
	h := c.Response().Header()
	setExact(h, headerRateLimitLimit, strconv.Itoa(res.Limit))
	setExact(h, headerRateLimitRemaining, strconv.Itoa(res.Remaining))
	if res.Allowed {
		return nil
	}
	retryAfter := retryAfterOr(res.RetryAfter, 1)
	setExact(h, headerRateLimitReset, strconv.FormatInt(now.Unix()+int64(retryAfter), 10))
	return tooManyAttempts(retryAfter)
}

// setExact sets header name to value under name exactly as spelled (Go's
// server writes a header map's keys to the wire as they are), dropping any
// canonical spelling of it set before, so the header is sent once.
func setExact(h http.Header, name, value string) {
	if c := http.CanonicalHeaderKey(name); c != name {
		delete(h, c)
	}
	h[name] = []string{value}
}
