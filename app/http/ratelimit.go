package http

import (
	"errors"
	"math"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/ratelimit"
)

// The rate limit headers, Laravel's names.
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
// A request the limiter could not count is served without a limit and
// without the headers (it fails open), unless the database is unavailable
// in general, which the request would meet anyway: that error is returned,
// a 503.
func (s *Server) throttle(c echo.Context, p auth.Principal) error {
	if s.limiter == nil {
		return nil
	}
	now := s.now()
	res, err := s.limiter.Take(c.Request().Context(), p.ConsumerID, now)
	if errors.Is(err, ratelimit.ErrNotCounted) {
		s.log.Warn("rate limit: request not counted, served without a limit",
			"request_id", RequestID(c), "consumer_id", p.ConsumerID, "error", err)
		return nil
	}
	if err != nil {
		return err
	}
	if res.Limit == 0 { // the limiter is off: no headers, as Laravel without a limiter
		return nil
	}
	h := c.Response().Header()
	h.Set(headerRateLimitLimit, strconv.Itoa(res.Limit))
	h.Set(headerRateLimitRemaining, strconv.Itoa(res.Remaining))
	if res.Allowed {
		return nil
	}
	retryAfter := max(int(math.Ceil(res.RetryAfter.Seconds())), 1)
	h.Set(headerRateLimitReset, strconv.FormatInt(now.Unix()+int64(retryAfter), 10))
	return tooManyAttempts(retryAfter)
}
