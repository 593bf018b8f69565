package ratelimit

import (
	"context"
	"sync"
	"time"
)

// memoryCounter counts in this process: one entry per consumer, its window's
// start and count. It is bounded by the consumers active in the last two
// minutes: once a clock minute, the entries of windows that are over are
// dropped.
type memoryCounter struct {
	mu      sync.Mutex
	swept   time.Time // the clock minute of the last sweep
	entries map[string]memoryEntry
}

type memoryEntry struct {
	start time.Time
	hits  int64
}

func newMemoryCounter() *memoryCounter {
	return &memoryCounter{entries: map[string]memoryEntry{}}
}

func (m *memoryCounter) hit(_ context.Context, consumer string, now time.Time, n, _ int64) (int64, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(now)
	e, ok := m.entries[consumer]
	if !ok || over(e.start, now) {
		e = memoryEntry{start: windowStart(now)}
	}
	e.hits += n
	m.entries[consumer] = e
	return e.hits, e.start, nil
}

// expire drops the entries of windows over at now.
func (m *memoryCounter) expire(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(now)
}

// expireLocked is expire, m.mu held: it sweeps once per clock minute.
func (m *memoryCounter) expireLocked(now time.Time) {
	minute := now.UTC().Truncate(Window)
	if !minute.After(m.swept) {
		return
	}
	m.swept = minute
	for k, e := range m.entries {
		if over(e.start, now) {
			delete(m.entries, k)
		}
	}
}
