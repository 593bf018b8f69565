package activity

import (
	"context"
	"fmt"
	"time"
)

// Point is one hour of a series: the hour's start (UTC) and its count.
type Point struct {
	Hour  time.Time
	Count int64
}

// MaxSeriesHours bounds the hours Series answers.
const MaxSeriesHours = 31 * 24

// row is a row of activity_hours.
type row struct {
	Hour   time.Time
	Metric string
	Count  int64
}

// Series returns, for each metric, the last hours hours ending with the
// current one, oldest first, every hour present (0 where nothing was
// counted). A count this process holds and has not flushed yet is in it;
// another replica's is once that replica flushed it.
func (r *Recorder) Series(ctx context.Context, metrics []string, hours int) (map[string][]Point, error) {
	if hours < 1 || hours > MaxSeriesHours {
		return nil, fmt.Errorf("activity: series of %d hours, want 1 to %d", hours, MaxSeriesHours)
	}
	last := hourOf(r.cfg.Now())
	first := last - int64(hours) + 1
	if err := r.lock(ctx); err != nil {
		return nil, fmt.Errorf("activity: series: %w", err)
	}
	var rows []row
	err := r.cfg.Read.WithContext(ctx).
		Raw("SELECT `hour`, metric, `count` FROM activity_hours WHERE `hour` >= ? AND `hour` <= ?", hourStart(first), hourStart(last)).
		Scan(&rows).Error
	if err == nil {
		rows = append(rows, r.peek()...)
	}
	r.unlock()
	if err != nil {
		return nil, fmt.Errorf("activity: series: %w", err)
	}
	out := make(map[string][]Point, len(metrics))
	for _, m := range metrics {
		ps := make([]Point, hours)
		for k := range ps {
			ps[k].Hour = hourStart(first + int64(k))
		}
		out[m] = ps
	}
	for _, rw := range rows {
		ps, ok := out[rw.Metric]
		if h := hourOf(rw.Hour); ok && h >= first && h <= last {
			ps[h-first].Count += rw.Count
		}
	}
	return out, nil
}

// peek returns the counts held in memory as rows, leaving them there.
func (r *Recorder) peek() []row {
	r.mu.Lock() // a slot moving on to the next hour moves its count under it
	defer r.mu.Unlock()
	var out []row
	for i := range r.slots {
		if h, c := unpack(r.slots[i].v.Load()); c > 0 {
			out = append(out, row{Hour: hourStart(h), Metric: known[i], Count: c})
		}
	}
	for k, n := range r.held {
		out = append(out, row{Hour: hourStart(k.hour), Metric: k.metric, Count: n})
	}
	return out
}

// Latest returns the newest row of metric as stored (a gauge's last value,
// and the hour it was written in); ok is false when there is none. Counts
// not flushed yet are not in it.
func (r *Recorder) Latest(ctx context.Context, metric string) (value int64, at time.Time, ok bool, err error) {
	var rows []row
	err = r.cfg.Read.WithContext(ctx).
		Raw("SELECT `hour`, metric, `count` FROM activity_hours WHERE metric = ? ORDER BY `hour` DESC LIMIT 1", metric).
		Scan(&rows).Error
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("activity: latest %s: %w", metric, err)
	}
	if len(rows) == 0 {
		return 0, time.Time{}, false, nil
	}
	return rows[0].Count, rows[0].Hour.UTC(), true, nil
}
