// Package wait is a pause that a context cuts short, and the jitter that
// keeps those who retry together from waking together.
package wait

import (
	"context"
	"math/rand/v2"
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
