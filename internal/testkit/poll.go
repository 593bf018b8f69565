package testkit

import (
	"fmt"
	"testing"
	"time"
)

// pollFirst and pollMost bound the pause between two calls of a polled
// condition: it starts at pollFirst and doubles up to pollMost, so a
// condition that soon holds is seen soon and a slow one is not hammered.
const (
	pollFirst = time.Millisecond
	pollMost  = 20 * time.Millisecond
)

// Poll calls cond until it returns true or within has passed, and reports
// whether it held. cond runs at least once, once more after the deadline,
// and on the caller's goroutine, so it may fail the test itself.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := pollFirst
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(pause)
		pause = min(2*pause, pollMost)
	}
}

// Eventually polls cond until it holds, else fails t with the message
// format and args make.
func Eventually(t testing.TB, within time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("%s: not within %s", fmt.Sprintf(format, args...), within)
	}
}
