package ratelimit

import (
	"context"
	"sync"
	"time"
)

// batchCounter takes a consumer's counts from a shared store n at a time
// (Config.Batch): one round trip reserves the next n values of the
// window's shared count for this process, and the requests that follow
// take them one by one without a round trip. Each value is handed out once
// by the whole fleet, so no more than the limit are ever allowed in a
// window. What it costs is precision: values a replica reserved and did
// not use by the window's end are nobody's, so with R replicas the 429s
// may begin up to R·(n−1) requests early; and a response's
// X-RateLimit-Remaining is this process's view of the shared count.
type batchCounter struct {
	store counter // the shared store's
	n     int64

	mu     sync.Mutex
	leases map[string]*lease // by consumer
}

// lease is the values of a consumer's window (starting at start) this
// process reserved: next to end, inclusive; none once the window is over.
// Its mutex is held across a reservation, so the requests of one consumer
// that find it spent wait for one round trip instead of each making its own.
type lease struct {
	mu    sync.Mutex
	start time.Time
	next  int64
	end   int64
}

// maxLeases bounds the consumers a batchCounter remembers; past it the
// leases of windows that are over are forgotten.
const maxLeases = 10000

func newBatchCounter(store counter, n int64) *batchCounter {
	return &batchCounter{store: store, n: n, leases: map[string]*lease{}}
}

// hit takes one value of the lease: b counts one request at a time.
func (b *batchCounter) hit(ctx context.Context, consumer string, now time.Time, _, _ int64) (int64, time.Time, error) {
	l := b.lease(consumer, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() || over(l.start, now) || l.next > l.end {
		total, start, err := b.store.hit(ctx, consumer, now, b.n, 0)
		if err != nil {
			return 0, time.Time{}, err
		}
		l.start, l.next, l.end = start, total-b.n+1, total
	}
	v := l.next
	l.next++
	return v, l.start, nil
}

// lease is consumer's lease, made when it has none.
func (b *batchCounter) lease(consumer string, now time.Time) *lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.leases[consumer]
	if !ok {
		if len(b.leases) >= maxLeases {
			b.forgetOver(now)
		}
		l = &lease{}
		b.leases[consumer] = l
	}
	return l
}

// forgetOver drops the leases of windows over at now, b.mu held. A lease
// in use is locked and kept: TryLock leaves it to its holder.
func (b *batchCounter) forgetOver(now time.Time) {
	for consumer, l := range b.leases {
		if l.mu.TryLock() {
			if over(l.start, now) {
				delete(b.leases, consumer)
			}
			l.mu.Unlock()
		}
	}
}
