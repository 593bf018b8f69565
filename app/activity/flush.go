package activity

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
)

// count is one row's worth of a flush: n to add to metric in hour.
type count struct {
	hourMetric
	n int64
}

// take removes every count from memory and returns them, by hour then
// metric (the order every replica writes rows in). The caller holds
// flushing.
func (r *Recorder) take() []count {
	var out []count
	for i := range r.slots {
		s := &r.slots[i].v
		for {
			v := s.Load()
			tag, c := unpack(v)
			if c == 0 {
				break
			}
			if s.CompareAndSwap(v, pack(tag, 0)) {
				out = append(out, count{hourMetric{tag, known[i]}, c})
				break
			}
		}
	}
	r.mu.Lock()
	held := r.held
	r.held = make(map[hourMetric]int64, len(held))
	r.mu.Unlock()
	for k, n := range held {
		out = append(out, count{k, n})
	}
	return merged(out)
}

// merged sums the counts of each hour and metric, sorted by hour then metric.
func merged(cs []count) []count {
	slices.SortFunc(cs, func(a, b count) int {
		if a.hour != b.hour {
			return cmp.Compare(a.hour, b.hour)
		}
		return cmp.Compare(a.metric, b.metric)
	})
	out := cs[:0]
	for _, c := range cs {
		if n := len(out); n > 0 && out[n-1].hourMetric == c.hourMetric {
			out[n-1].n += c.n
			continue
		}
		out = append(out, c)
	}
	return out
}

// giveBack returns the counts of a failed flush to memory, for the next
// flush, within maxHeld: past it the oldest hours are dropped.
func (r *Recorder) giveBack(cs []count) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.held[c.hourMetric] += c.n
	}
	r.trim()
}

// lock takes flushing, or gives up when ctx ends first.
func (r *Recorder) lock(ctx context.Context) error {
	select {
	case r.flushing <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Recorder) unlock() { <-r.flushing }

// Flush writes the counts held in memory to the table, each added to its
// hour's row, in one transaction. When it fails the counts stay in memory
// for the next flush (within a bound: see maxHeld) and it returns the
// error. A transaction whose commit was lost on the way back (the database
// committed, the connection broke) is counted twice: chart data.
func (r *Recorder) Flush(ctx context.Context) error {
	if err := r.lock(ctx); err != nil {
		return fmt.Errorf("activity: flush: %w", err)
	}
	defer r.unlock()
	cs := r.take()
	err := r.write(ctx, cs)
	if err != nil {
		r.giveBack(cs)
		err = fmt.Errorf("activity: flush %d hour count(s): %w", len(cs), err)
	}
	r.mu.Lock()
	dropped := r.dropped
	r.dropped = 0
	r.mu.Unlock()
	if dropped > 0 {
		r.cfg.Log.Warn("activity counts dropped: more hours held in memory than the bound (the database refused them for long)",
			"counts", dropped, "bound", maxHeld)
	}
	return err
}

// write adds cs to their rows in one transaction (run again whole on a lock
// conflict), one statement per row, the same statement for each.
func (r *Recorder) write(ctx context.Context, cs []count) error {
	if len(cs) == 0 {
		return nil
	}
	return database.Transact(ctx, r.cfg.DB, r.cfg.Retry, func(tx *gorm.DB) error {
		for _, c := range cs {
			if err := database.AddActivityHour(ctx, tx, hourStart(c.hour), c.metric, c.n).Error; err != nil {
				return err
			}
		}
		return nil
	})
}

// Run flushes every Interval until ctx ends, then once more on a context of
// its own (a few seconds), so that a stopping server keeps what it counted.
// A failed flush is logged at Warn and its counts are tried again next time.
func (r *Recorder) Run(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
			err := r.Flush(final)
			cancel()
			if err != nil {
				r.cfg.Log.Warn("activity flush failed as it stops", "error", err)
			}
			return
		case <-tick.C:
		}
		if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("activity flush failed: its counts are kept for the next", "error", err)
		}
	}
}

// Set writes the gauge metric's value for the current hour, replacing what
// the hour held (the last drift check's mismatches). It writes at once; a
// gauge is not counted with Add.
func (r *Recorder) Set(ctx context.Context, metric string, n int64) error {
	if !validMetric(metric) {
		return fmt.Errorf("%w: %q", ErrInvalidMetric, metric)
	}
	h := hourStart(hourOf(r.cfg.Now()))
	err := r.cfg.Retry(ctx, func() *gorm.DB {
		return database.SetActivityHour(ctx, r.cfg.DB, h, metric, n)
	}).Error
	if err != nil {
		return fmt.Errorf("activity: set %s: %w", metric, err)
	}
	return nil
}

// Prune deletes the rows of the hours that started before before, and
// returns how many it deleted.
func (r *Recorder) Prune(ctx context.Context, before time.Time) (int64, error) {
	res := r.cfg.Retry(ctx, func() *gorm.DB {
		return r.cfg.DB.WithContext(ctx).Exec("DELETE FROM activity_hours WHERE `hour` < ?", before.UTC())
	})
	if res.Error != nil {
		return 0, fmt.Errorf("activity: prune: %w", res.Error)
	}
	return res.RowsAffected, nil
}
