package idempotency

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// PrunerConfig is what a Pruner needs; NewPruner resolves its defaults.
type PrunerConfig struct {
	Store    *Store
	Batch    int           // ids per DELETE, small enough never to hold long locks; default 500
	Interval time.Duration // how often Run makes a pass; default an hour
	Log      *slog.Logger  // nil: discard
	Now      func() time.Time
	// Observe, when set, is told how many records each pass deleted.
	Observe func(deleted int64)
}

// Pruner deletes expired records: every serve process runs it in a loop,
// and `licensor prune` runs one pass.
type Pruner struct {
	cfg PrunerConfig
}

// NewPruner returns a Pruner.
func NewPruner(cfg PrunerConfig) *Pruner {
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observe == nil {
		cfg.Observe = func(int64) {}
	}
	return &Pruner{cfg: cfg}
}

// RunOnce deletes every expired record and returns how many.
func (p *Pruner) RunOnce(ctx context.Context) (int64, error) {
	n, err := p.cfg.Store.Prune(ctx, p.cfg.Now().UTC(), p.cfg.Batch)
	if n > 0 {
		p.cfg.Observe(n)
	}
	return n, err
}

// Run prunes every Interval (with jitter) until ctx ends.
func (p *Pruner) Run(ctx context.Context) {
	for {
		n, err := p.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.cfg.Log.Error("prune", "error", err)
		} else if n > 0 {
			p.cfg.Log.Info("pruned expired idempotency records", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.cfg.Interval + rand.N(p.cfg.Interval/10+1)):
		}
	}
}
