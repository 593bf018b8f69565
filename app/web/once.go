package web

import (
	"sync"
	"time"
)

// onceSet remembers the forms already sent, so that a form whose answer
// shows a secret once (issuing a token) does its work once: the browser's
// "send the form again?" on a reload, or a double click, finds its form
// spent. Each form carries a random value of its own (randomToken); a
// value is spent for onceTTL. It is this process's memory: a form sent
// again to another replica is not caught (the token list shows both, and
// either can be revoked).
type onceSet struct {
	now  func() time.Time
	mu   sync.Mutex
	seen map[string]time.Time // when each value was spent
}

// onceTTL is how long a spent form stays spent: longer than a page stays
// open before its form is sent again, in practice.
const onceTTL = 12 * time.Hour

// maxOnce bounds the values kept; past it the oldest are forgotten.
const maxOnce = 10000

func newOnceSet(now func() time.Time) *onceSet {
	return &onceSet{now: now, seen: map[string]time.Time{}}
}

// spend reports whether value is a form not sent before, and marks it sent.
// An empty value is no form of the console's.
func (o *onceSet) spend(value string) bool {
	if value == "" {
		return false
	}
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if at, ok := o.seen[value]; ok && now.Sub(at) < onceTTL {
		return false
	}
	if len(o.seen) >= maxOnce {
		o.forgetOldest(now)
	}
	o.seen[value] = now
	return true
}

// forgetOldest drops the values past onceTTL, or if none is, the oldest.
func (o *onceSet) forgetOldest(now time.Time) {
	var oldest string
	for v, at := range o.seen {
		if now.Sub(at) >= onceTTL {
			delete(o.seen, v)
		} else if oldest == "" || at.Before(o.seen[oldest]) {
			oldest = v
		}
	}
	if len(o.seen) >= maxOnce {
		delete(o.seen, oldest)
	}
}
