package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"
)

// PrunerConfig is what a Pruner needs; NewPruner resolves its defaults.
type PrunerConfig struct {
	Store    *Store
	Interval time.Duration // how often Run makes a pass; default an hour
	Log      *slog.Logger  // nil: discard
	Now      func() time.Time
	Observe  func(deleted int64) // when set, told how many records each pass deleted
	// Also are other stores' prunes, by what each deletes (for the log),
	// that each pass runs after the records' (in the order of their names),
	// so that one loop and one command prune everything. Each deletes what
	// expired at now.
	Also map[string]func(ctx context.Context, now time.Time) (int64, error)
}

// pruneBatch is how many ids one DELETE of the pruner names: small enough
// never to hold long locks.
const pruneBatch = 500

// Pruner deletes expired records: every serve process runs it in a loop,
// and `licensor prune` runs one pass.
type Pruner struct {
	cfg PrunerConfig
}

// NewPruner returns a Pruner.
func NewPruner(cfg PrunerConfig) *Pruner {
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

// RunOnce deletes every expired record, then runs the other prunes, and
// returns how many rows each deleted. An error of one does not stop the
// others.
func (p *Pruner) RunOnce(ctx context.Context) (int64, map[string]int64, error) {
	now := p.cfg.Now().UTC()
	n, err := p.cfg.Store.prune(ctx, now, pruneBatch)
	if n > 0 {
		p.cfg.Observe(n)
	}
	others := make(map[string]int64, len(p.cfg.Also))
	for _, name := range slices.Sorted(maps.Keys(p.cfg.Also)) {
		k, ferr := p.cfg.Also[name](ctx, now)
		others[name] = k
		if ferr != nil {
			err = errors.Join(err, fmt.Errorf("prune %s: %w", name, ferr))
		}
	}
	return n, others, err
}

// Run prunes every Interval (with jitter) until ctx ends.
func (p *Pruner) Run(ctx context.Context) {
	for {
		n, others, err := p.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.cfg.Log.Error("prune", "error", err)
		}
		if n > 0 {
			p.cfg.Log.Info("pruned expired idempotency records", "deleted", n)
		}
		for name, k := range others {
			if k > 0 {
				p.cfg.Log.Info("pruned expired "+name, "deleted", k)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.cfg.Interval + rand.N(p.cfg.Interval/10+1)):
		}
	}
}
