package web

import (
	"sync"
	"time"
)

// loginLimiter counts failed sign-ins in fixed one-minute windows, twice:
// per client address, so that one address cannot try many tokens, and per
// token tried (the id the token claims), so that many addresses cannot try
// one token. An attempt goes on only while both its windows have room.
// The counts are this process's (a fleet of n lets an address try n times
// as often). Each of the two keeps at most maxWindows windows; past that it
// forgets the stale ones, and if every one is fresh it refuses new keys
// rather than grow (an attacker spraying addresses or token ids locks the
// console for a minute, never the server's memory).
type loginLimiter struct {
	perMinute int
	now       func() time.Time
	mu        sync.Mutex
	byAddr    windows
	byToken   windows
}

type windows map[string]loginWindow

type loginWindow struct {
	start   time.Time
	count   int
	refused bool // an attempt of this window was refused already
}

const maxWindows = 10000

// limitRefusal is why take refused an attempt: which count is spent, how
// long until it has room again, and whether this is the window's first
// refusal (the one worth a log line: a flood of attempts is no flood of
// lines).
type limitRefusal struct {
	by         string // "address" or "token"
	retryAfter time.Duration
	first      bool
}

func newLoginLimiter(perMinute int, now func() time.Time) *loginLimiter {
	return &loginLimiter{perMinute: perMinute, now: now, byAddr: windows{}, byToken: windows{}}
}

// take counts an attempt from addr with tokenID ("" for a string that claims
// none), or refuses it; a refused attempt is counted in neither window.
func (l *loginLimiter) take(addr, tokenID string) *limitRefusal {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byAddr.room(addr, now, l.perMinute, "address"); r != nil {
		return r
	}
	if tokenID != "" {
		if r := l.byToken.room(tokenID, now, l.perMinute, "token"); r != nil {
			return r
		}
		l.byToken.count(tokenID, now)
	}
	l.byAddr.count(addr, now)
	return nil
}

// forgive takes back the attempt take counted, when it signed in: only
// failed attempts count against an address or a token.
func (l *loginLimiter) forgive(addr, tokenID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byAddr.uncount(addr)
	if tokenID != "" {
		l.byToken.uncount(tokenID)
	}
}

// room refuses a spent window, or a new key when every window kept is fresh.
// A spent window remembers that it refused.
func (ws windows) room(key string, now time.Time, perMinute int, by string) *limitRefusal {
	w, found := ws[key]
	if !found || now.Sub(w.start) >= time.Minute {
		if !found && len(ws) >= maxWindows && !ws.forgetStale(now) {
			return &limitRefusal{by: by, retryAfter: time.Minute}
		}
		return nil
	}
	if w.count < perMinute {
		return nil
	}
	first := !w.refused
	w.refused = true
	ws[key] = w
	return &limitRefusal{by: by, retryAfter: w.start.Add(time.Minute).Sub(now), first: first}
}

func (ws windows) count(key string, now time.Time) {
	w, found := ws[key]
	if !found || now.Sub(w.start) >= time.Minute {
		w = loginWindow{start: now}
	}
	w.count++
	ws[key] = w
}

func (ws windows) uncount(key string) {
	if w, found := ws[key]; found && w.count > 0 {
		w.count--
		ws[key] = w
	}
}

func (ws windows) forgetStale(now time.Time) bool {
	before := len(ws)
	for key, w := range ws {
		if now.Sub(w.start) >= time.Minute {
			delete(ws, key)
		}
	}
	return len(ws) < before
}
