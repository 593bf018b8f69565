package ratelimit

import (
	"context"
	"sync"
	"time"
)

// memoryCounter counts in this process: one entry per consumer, for the
// window it last made a request in. It is bounded by the consumers active in
// the current window: when the first request of a new window arrives, the
// entries of windows that are over are dropped.
type memoryCounter struct {
	mu      sync.Mutex
	newest  time.Time // the newest window seen
	entries map[string]memoryEntry
}

type memoryEntry struct {
	window time.Time
	hits   int64
}

var _ counter = (*memoryCounter)(nil)

func newMemoryCounter() *memoryCounter {
	return &memoryCounter{entries: map[string]memoryEntry{}}
}

func (m *memoryCounter) hit(_ context.Context, consumer string, window time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(window)
	e := m.entries[consumer]
	if !e.window.Equal(window) {
		e = memoryEntry{window: window}
	}
	e.hits++
	m.entries[consumer] = e
	return e.hits, nil
}

// expire drops the entries of windows before window.
func (m *memoryCounter) expire(window time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(window)
}

// expireLocked is expire, m.mu held: it sweeps once, when window is the
// newest seen.
func (m *memoryCounter) expireLocked(window time.Time) {
	if !window.After(m.newest) {
		return
	}
	m.newest = window
	for k, e := range m.entries {
		if e.window.Before(window) {
			delete(m.entries, k)
		}
	}
}

// len is how many entries the counter holds.
func (m *memoryCounter) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
