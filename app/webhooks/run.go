package webhooks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/licensor-api/licensor/internal/wait"
)

// DeliverDue claims the deliveries due now (a fair share of them: see
// claim) and sends them, several at once, recording each attempt; it
// returns how many it claimed, 0 when none was due. Once ctx ends no
// delivery is started (those claimed are given back), and those in flight
// finish within Timeout and are recorded. It is one round of what Run does
// continuously: for a command, and for tests.
func (s *Service) DeliverDue(ctx context.Context) (int, error) {
	batch, err := s.claim(ctx, senders, nil)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range batch {
		wg.Go(func() {
			if err := s.send(ctx, c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return len(batch), errors.Join(errs...)
}

// Run dispatches the committed events and delivers what is due until ctx
// ends. The two never wait for each other: dispatch (numbering new events
// for the feed, owing them to endpoints) runs every Interval on its own,
// however slow the endpoints are; delivery keeps up to senders attempts in
// flight, claiming again as soon as one ends, when dispatch owed something
// new, or every Interval. Once ctx ends, Run returns when the attempts in
// flight are recorded.
func (s *Service) Run(ctx context.Context) {
	owed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() { s.dispatchLoop(ctx, owed) })
	s.deliverLoop(ctx, owed)
	wg.Wait()
}

// dispatchLoop dispatches every Interval, and tells the delivery loop when it dispatched something.
func (s *Service) dispatchLoop(ctx context.Context, owed chan<- struct{}) {
	for {
		n, err := s.Dispatch(ctx)
		if err != nil && ctx.Err() == nil {
			s.cfg.Log.Error("dispatch consumer events", "error", err)
		}
		if n > 0 {
			select {
			case owed <- struct{}{}:
			default: // the delivery loop has been told already
			}
		}
		if wait.Sleep(ctx, s.interval()) != nil {
			return
		}
	}
}

// interval is Interval with up to a tenth more (jitter, so that replicas
// drift apart).
func (s *Service) interval() time.Duration { return s.cfg.Interval + wait.Jitter(s.cfg.Interval/10) }

// deliverLoop keeps up to senders attempts in flight: it claims for the
// free senders (each consumer's held senders weighed by claim's share),
// starts each attempt on its own goroutine, and claims again when one ends,
// when owed says dispatch owed deliveries, or after Interval.
func (s *Service) deliverLoop(ctx context.Context, owed <-chan struct{}) {
	held := map[string]int{} // the senders each consumer holds
	busy := 0
	ended := make(chan string, senders) // the consumer of an attempt that ended
	var sends sync.WaitGroup
	defer sends.Wait()
	release := func(consumerID string) {
		busy--
		if held[consumerID]--; held[consumerID] <= 0 {
			delete(held, consumerID)
		}
	}
	for ctx.Err() == nil {
		claimedAny := false
		if busy < senders {
			batch, err := s.claim(ctx, senders-busy, held)
			if err != nil && ctx.Err() == nil {
				s.cfg.Log.Error("claim webhook deliveries", "error", err)
			}
			for _, c := range batch {
				busy++
				held[c.ConsumerID]++
				sends.Go(func() {
					if err := s.send(ctx, c); err != nil && ctx.Err() == nil {
						s.cfg.Log.Error("deliver webhook", "delivery_id", c.ID, "error", err)
					}
					ended <- c.ConsumerID
				})
			}
			claimedAny = len(batch) > 0
		}
		if claimedAny && busy < senders {
			continue // more may be due than one claim took
		}
		select {
		case <-ctx.Done():
		case id := <-ended:
			release(id)
		case <-owed:
		case <-time.After(s.interval()):
		}
		for drained := false; !drained; { // every attempt that ended meanwhile
			select {
			case id := <-ended:
				release(id)
			default:
				drained = true
			}
		}
	}
}
