package ratelimit

import "sync"

// Concurrency bounds how many requests of one consumer are in flight at once
// in this process (CONSUMER_CONCURRENCY): Stripe's concurrent requests
// limiter, beside the rate limit. The rate limit bounds how many requests a
// consumer starts a minute; this bounds how many it holds open, so that a
// consumer whose calls are slow (a slow vendor) cannot take every worker and
// vendor call slot from the others.
//
// The count is this process's own: each replica admits its own limit per
// consumer. Memory holds one small counter per consumer with a request in
// flight, deleted when its last one ends.
type Concurrency struct {
	limit int

	mu       sync.Mutex
	inFlight map[string]int // by consumer id; no entry at 0
}

// NewConcurrency returns a limiter that lets each consumer hold limit
// requests in flight; a limit of 0 (or less) turns it off, and so does a nil
// *Concurrency.
func NewConcurrency(limit int) *Concurrency {
	return &Concurrency{limit: limit, inFlight: map[string]int{}}
}

// Acquire takes one of consumer's slots. ok is false when the consumer
// already has the limit in flight: nothing was taken, and release does
// nothing. Otherwise the caller must call release once the request has
// ended; calling it again does nothing.
func (c *Concurrency) Acquire(consumer string) (release func(), ok bool) {
	if c == nil || c.limit <= 0 {
		return func() {}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight[consumer] >= c.limit {
		return func() {}, false
	}
	c.inFlight[consumer]++
	var once sync.Once
	return func() { once.Do(func() { c.release(consumer) }) }, true
}

func (c *Concurrency) release(consumer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.inFlight[consumer] - 1; n > 0 {
		c.inFlight[consumer] = n
	} else {
		delete(c.inFlight, consumer)
	}
}
