package web

import (
	"sync"
	"time"
)

// loginLimiter counts the sign-in attempts of each client address in a
// fixed one-minute window, in this process (a replica's own count: a fleet
// of n lets an address try n times as often). It keeps at most maxAddresses
// windows; past that it forgets the stale ones, and if every one is fresh it
// refuses new addresses rather than grow (an attacker spraying addresses
// locks the console for a minute, never the server's memory).
type loginLimiter struct {
	perMinute int
	now       func() time.Time
	mu        sync.Mutex
	windows   map[string]loginWindow
}

type loginWindow struct {
	start   time.Time
	count   int
	refused bool // an attempt of this window was refused already
}

const maxAddresses = 10000

func newLoginLimiter(perMinute int, now func() time.Time) *loginLimiter {
	return &loginLimiter{perMinute: perMinute, now: now, windows: map[string]loginWindow{}}
}

// take counts an attempt from addr; it reports whether the attempt may go
// on, and if not, how long until it may, and whether it is the window's
// first refusal (the one worth a log line).
func (l *loginLimiter) take(addr string) (ok bool, retryAfter time.Duration, firstRefusal bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, found := l.windows[addr]
	if !found || now.Sub(w.start) >= time.Minute {
		if !found && len(l.windows) >= maxAddresses && !l.forgetStale(now) {
			return false, time.Minute, false
		}
		w = loginWindow{start: now}
	}
	if w.count >= l.perMinute {
		first := !w.refused
		w.refused = true
		l.windows[addr] = w
		return false, w.start.Add(time.Minute).Sub(now), first
	}
	w.count++
	l.windows[addr] = w
	return true, 0, false
}

// forgetStale drops the windows that have ended; it reports whether any
// room was made.
func (l *loginLimiter) forgetStale(now time.Time) bool {
	before := len(l.windows)
	for addr, w := range l.windows {
		if now.Sub(w.start) >= time.Minute {
			delete(l.windows, addr)
		}
	}
	return len(l.windows) < before
}
