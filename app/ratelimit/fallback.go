package ratelimit

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DegradedMessage is the line a Limiter logs, once a Window at most, while
// its shared store cannot count and the replica counts in its own memory.
const DegradedMessage = "rate limit: the store did not count, this replica counts alone"

// RecoveredMessage is the line a Limiter logs when its shared store counts
// again after DegradedMessage.
const RecoveredMessage = "rate limit: the store counts again"

// fallback counts in this process the requests the shared store could not
// count (down, refusing, past its timeout), so that an outage of the store
// never lifts the limit: each replica then allows a consumer its share of
// the limit (Config.FallbackShare) in the window. The counts are a
// memoryCounter's, bounded by the consumers counted here in one window. It
// says so in a metric, a gauge and a log line once a Window at most; the
// next request the store counts ends it.
type fallback struct {
	counter  *memoryCounter
	limit    int // a consumer's requests per window while counted here
	store    string
	log      *slog.Logger
	counted  func()      // each request counted here (a metric)
	degraded func(bool)  // entering and leaving (a gauge)
	on       atomic.Bool // the last count was this process's
	mu       sync.Mutex  // orders what follows and the calls to degraded
	told     bool        // DegradedMessage written, RecoveredMessage not yet
	last     time.Time   // when DegradedMessage was last written; zero: never
	since    int64       // requests counted here since then, not told yet
}

func newFallback(cfg Config) *fallback {
	return &fallback{
		counter: newMemoryCounter(),
		// The share of the limit, rounded, and at least 1: a replica on its
		// own never refuses every request.
		limit: max(int(math.Round(float64(cfg.PerMinute)*cfg.FallbackShare)), 1),
		store: cfg.Store, log: cfg.Log, counted: cfg.CountedLocally, degraded: cfg.Degraded,
	}
}

// hit counts one request of consumer at now here, because the store
// failed with cause, and returns its local window's count and start.
func (f *fallback) hit(consumer string, now time.Time, cause error) (int64, time.Time) {
	hits, start, _ := f.counter.hit(context.Background(), consumer, now, 1, 0) // cannot fail
	f.counted()
	f.mu.Lock()
	if !f.on.Swap(true) {
		f.degraded(true)
	}
	f.since++
	due := f.last.IsZero() || now.Sub(f.last) >= Window || now.Before(f.last)
	since := f.since
	if due {
		f.last, f.since, f.told = now, 0, true
	}
	f.mu.Unlock()
	if due {
		f.log.Warn(DegradedMessage, "store", f.store, "counted_locally", since, "local_limit", f.limit,
			"consumer_id", consumer, "error", cause)
	}
	return hits, start
}

// shared notes that the store counted a request at now: if this process was
// counting alone, it no longer is. Its cost while the store counts is one
// atomic load.
func (f *fallback) shared(now time.Time) {
	if !f.on.Load() {
		return
	}
	f.mu.Lock()
	if !f.on.Swap(false) {
		f.mu.Unlock()
		return
	}
	f.degraded(false)
	told, since := f.told, f.since
	if told {
		f.told, f.since = false, 0
	}
	f.mu.Unlock()
	f.counter.expire(now)
	if told { // one line back for each line out: at most two a Window
		f.log.Info(RecoveredMessage, "store", f.store, "counted_locally", since)
	}
}
