package idempotency

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Pruner deletes expired records: every serve process runs it in a loop,
// and `licensor prune` runs one pass.
type Pruner struct {
	Store *Store
	Batch int // ids per DELETE; small enough never to hold long locks
	Log   *slog.Logger
	Now   func() time.Time
	// Observe, when set, is told how many records each pass deleted.
	Observe func(deleted int64)
}

// RunOnce deletes every expired record and returns how many.
func (p *Pruner) RunOnce(ctx context.Context) (int64, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	batch := p.Batch
	if batch <= 0 {
		batch = 500
	}
	n, err := p.Store.Prune(ctx, now().UTC(), batch)
	if p.Observe != nil && n > 0 {
		p.Observe(n)
	}
	return n, err
}

// Run prunes every interval (with jitter) until ctx ends.
func (p *Pruner) Run(ctx context.Context, interval time.Duration) {
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		n, err := p.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error("prune", "error", err)
		} else if n > 0 {
			log.Info("pruned expired idempotency records", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval + rand.N(interval/10+1)):
		}
	}
}
