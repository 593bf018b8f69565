package vendorclient

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// parseRetryAfter reads a Retry-After header: whole seconds, or an HTTP date
// (a date already past means now). given is false when there is no usable value.
func parseRetryAfter(v string, now time.Time) (wait time.Duration, given bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff is the wait before retry number attempt when the vendor gave no
// Retry-After: VENDOR_RETRY_BASE doubled per attempt, capped at
// VENDOR_RETRY_MAX_WAIT, less a random part of up to half of it ("equal
// jitter"), so that clients refused together come back apart.
func (d *HTTPDriver) backoff(attempt int) time.Duration {
	step := d.cfg.RetryBase
	for i := 1; i < attempt && step < d.cfg.RetryMaxWait; i++ {
		step *= 2
	}
	step = min(step, d.cfg.RetryMaxWait)
	return step - step/2 + d.jitter(step/2)
}
