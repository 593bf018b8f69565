// Package wait is a pause that a context cuts short, the jitter that keeps
// those who retry together from waking together, and the pause a server
// asks for in its Retry-After.
package wait

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sleep waits d, or less when ctx ends first (at once if it has ended): it
// returns ctx's error then, nil when the whole of d passed.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Jitter is a uniformly random duration in [0, d].
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// RetryAfter reads a Retry-After header: whole seconds, or an HTTP date (a
// date past means now). given is false when there is no usable value.
func RetryAfter(v string, now time.Time) (wait time.Duration, given bool) {
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
