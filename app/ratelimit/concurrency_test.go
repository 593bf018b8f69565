package ratelimit

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// A consumer holds at most the limit; the next is refused until one ends,
// another consumer has slots of its own, and a release counts once.
func TestConcurrencyLimitsEachConsumer(t *testing.T) {
	c := NewConcurrency(2)
	r1, ok1 := c.Acquire("acme")
	_, ok2 := c.Acquire("acme")
	if !ok1 || !ok2 {
		t.Fatalf("the first two were refused: %v %v", ok1, ok2)
	}
	refusedRelease, ok := c.Acquire("acme")
	if ok {
		t.Fatal("a third in flight was admitted at a limit of 2")
	}
	refusedRelease() // gives back nothing
	if _, ok := c.Acquire("acme"); ok {
		t.Fatal("releasing a refusal freed a slot")
	}
	if _, ok := c.Acquire("zeta"); !ok {
		t.Fatal("another consumer was refused")
	}
	r1()
	r1() // a second call does nothing
	if _, ok := c.Acquire("acme"); !ok {
		t.Fatal("a slot released was not free again")
	}
	if _, ok := c.Acquire("acme"); ok {
		t.Fatal("releasing twice freed two slots")
	}
}

// Off: a limit of 0 and a nil limiter admit everything.
func TestConcurrencyOff(t *testing.T) {
	for name, c := range map[string]*Concurrency{"zero": NewConcurrency(0), "nil": nil} {
		t.Run(name, func(t *testing.T) {
			for range 100 {
				if _, ok := c.Acquire("acme"); !ok {
					t.Fatal("refused while off")
				}
			}
		})
	}
}

// Real goroutines: however many ask at once, a consumer never has more than
// the limit in flight, and every counter is gone once they have all ended.
func TestConcurrencyUnderContention(t *testing.T) {
	const limit, workers, rounds = 5, 32, 300
	c := NewConcurrency(limit)
	inFlight := map[string]*atomic.Int64{"acme": {}, "zeta": {}}
	var admitted, refused, over atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		consumer := []string{"acme", "zeta"}[w%2]
		wg.Go(func() {
			for range rounds {
				release, ok := c.Acquire(consumer)
				if !ok {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				if inFlight[consumer].Add(1) > limit {
					over.Add(1)
				}
				runtime.Gosched() // hold the slot while others ask
				inFlight[consumer].Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if over.Load() > 0 {
		t.Errorf("%d times a consumer had more than %d in flight", over.Load(), limit)
	}
	if admitted.Load() == 0 {
		t.Fatal("nothing was admitted")
	}
	t.Logf("admitted %d, refused %d", admitted.Load(), refused.Load())
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.inFlight) != 0 {
		t.Errorf("counters left after every request ended: %v", c.inFlight)
	}
}
