// Package activity keeps hourly activity counters in licensor's own
// database, for the operator console's charts: how many licenses were
// created, how many idempotent requests were replayed, refused as a conflict
// or answered pending, per UTC hour, and the mismatches of the last drift
// check.
//
// Counting is on the request path, so Add only counts in memory (an atomic
// per known metric, no lock, no allocation); Run writes the counts to the
// activity_hours table every Interval, adding them to their hour's row, which
// the flushes of every replica add to. A crash loses at most one interval's
// counts: this is chart data, never read for a decision.
package activity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
)

// The metrics licensor counts. Which guard outcome (app/idempotency's// Outcome, what Guard's Observe is told) counts in which is
// ObserveIdempotency's mapping:
//
//   - replayed → Replays: a stored answer sent again.
//   - in_progress and mismatch → Conflicts: a 409 (the key's request still
//     runs, or its owner lost it) and a 422 (the key reused with another
//     request).
//   - pending → Pending: a 202, for a new intent kept pending and for a
//     retry of one still pending.
//   - executed, taken_over, released, not_kept, superseded, discarded count
//     in none.
//
// Creates are not counted from the guard: "executed" of licenses.store is
// told for a create that answered 201, but also for a completion whose
// settle then failed, and not for a create the reconciler finishes, nor a
// keyless one that had no record to settle. They are counted where a
// license is made: the licenses service's commit of a new license row
// (licenses.Config.ObserveCreated), whatever asked for it — a keyed or
// keyless request, the reconciler finishing a pending create, a command.
// A retry answered 201 from the license its intent already made counts
// nothing: no license was made.
const (
	// Creates counts the licenses made: each commit of a new license row.
	Creates = "licenses.created"
	// Replays counts the requests answered with a stored answer.
	Replays = "idempotency.replayed"
	// Conflicts counts the requests refused because their key was in use
	// (409) or reused for another request (422).
	Conflicts = "idempotency.conflict"
	// Pending counts the 202 answers: an intent whose outcome is unknown.
	Pending = "idempotency.pending"
	// DriftMismatches is a gauge: the mismatches the last drift check
	// found (and left unfixed), written with Set; DriftKind names one
	// kind's.
	DriftMismatches = "drift.mismatches"
)

// DriftKind is the gauge of one kind of drift mismatch (licenses.DriftKinds:
// "site_gone" → "drift.site_gone"), written with Set beside DriftMismatches.
func DriftKind(kind string) string { return "drift." + kind }

// known are the counters that have a slot of their own: Add counts them
// without a lock or an allocation. Any other valid name is counted too,
// under a mutex.
var known = [...]string{Creates, Replays, Conflicts, Pending}

const (
	iCreates = iota
	iReplays
	iConflicts
	iPending
)

// slotOf is the index of a known metric in known, -1 for another.
func slotOf(metric string) int {
	switch metric {
	case Creates:
		return iCreates
	case Replays:
		return iReplays
	case Conflicts:
		return iConflicts
	case Pending:
		return iPending
	}
	return -1
}

// MaxMetricLen is the longest metric name the table holds.
const MaxMetricLen = 64

// ErrInvalidMetric is a metric name that is empty, longer than
// MaxMetricLen, or has a byte other than an ASCII letter, digit, '.', '_'
// or '-'.
var ErrInvalidMetric = errors.New("activity: invalid metric name")

// validMetric reports whether name is a metric name the table takes: a
// name it refused would fail every flush that carried it.
func validMetric(name string) bool {
	if name == "" || len(name) > MaxMetricLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Config is what a Recorder needs.
type Config struct {
	// DB is where the counts are written.
	DB *gorm.DB
	// Read serves Series and Latest (SQLite's read-only pool); nil: DB.
	Read *gorm.DB
	// Now is the clock that decides a count's hour; nil: time.Now.
	Now func() time.Time
	// Interval is how often Run flushes; 0: 10s.
	Interval time.Duration
	// Log receives a failed flush's warning; nil: discarded.
	Log *slog.Logger
	// Retry runs a statement (or a flush's transaction, whole) again while
	// it loses a lock conflict (database.RetryOnConflict); nil runs it once.
	Retry func(ctx context.Context, stmt func() *gorm.DB) *gorm.DB
}

// DefaultInterval is Run's flush interval when Config.Interval is 0.
const DefaultInterval = 10 * time.Second

// maxHeld bounds the hour counts held in memory besides the slots (other
// metrics, a slot's past hour, and what failed flushes gave back): past it
// (by a quarter at most, between two trims) the oldest hours are dropped,
// so that a database down for days cannot grow the process. 4096 is some
// forty days of the known counters.
const maxHeld = 4096

// finalFlushTimeout bounds the flush Run makes as it stops.
const finalFlushTimeout = 5 * time.Second

// Recorder counts activity per hour in memory and writes it to the
// activity_hours table. Its methods are safe for concurrent use.
type Recorder struct {
	cfg Config
	// slots holds the known counters of the hour being counted, one per
	// metric of known, each packing the hour and its count (see pack).
	slots [len(known)]slot
	// flushing is held by a flush and by a Series (so that a count is
	// either in memory or in the table as it reads both, never neither nor
	// both); a channel, so that waiting for it heeds a context.
	flushing chan struct{}

	mu      sync.Mutex
	held    map[hourMetric]int64 // counts not in a slot
	dropped int64                // counts dropped since the last warning (see maxHeld)
}

// slot is one known counter, alone on its cache line: concurrent Adds of
// different metrics do not contend.
type slot struct {
	v atomic.Uint64
	_ [56]byte
}

// hourMetric is a count's key: the hour (hours since the Unix epoch) and
// the metric.
type hourMetric struct {
	hour   int64
	metric string
}

// A slot packs the hour it counts (its number since the Unix epoch) in its
// top tagBits bits and that hour's count in the others: one atomic
// compare-and-swap both checks that the slot still counts the caller's hour
// and counts, so a count always lands in the hour its Add read from the
// clock, even as another Add moves the slot on to the next hour.
const (
	countBits = 40
	countMask = 1<<countBits - 1
	tagBits   = 64 - countBits
	maxTag    = 1<<tagBits - 1 // the year 3883
)

func pack(hour int64, count uint64) uint64  { return uint64(hour)<<countBits | count }
func unpack(v uint64) (hour int64, n int64) { return int64(v >> countBits), int64(v & countMask) }

// New returns a Recorder; Run flushes it.
func New(cfg Config) *Recorder {
	if cfg.Read == nil {
		cfg.Read = cfg.DB
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Retry == nil {
		cfg.Retry = func(_ context.Context, stmt func() *gorm.DB) *gorm.DB { return stmt() }
	}
	return &Recorder{cfg: cfg, flushing: make(chan struct{}, 1), held: map[hourMetric]int64{}}
}

// hourOf is the number of t's UTC hour since the Unix epoch.
func hourOf(t time.Time) int64 {
	s := t.Unix()
	h := s / 3600
	if s < 0 && s%3600 != 0 {
		h--
	}
	return h
}

// hourStart is the start of the hour numbered h, in UTC.
func hourStart(h int64) time.Time { return time.Unix(h*3600, 0).UTC() }

// Add counts n more of metric in the current hour, in memory (Run writes
// it). For the known metrics (Creates, Replays, Conflicts, Pending) it takes
// no lock and allocates nothing; another metric is counted under a mutex. A
// count of 0 or less, and a name that is not valid (see ErrInvalidMetric),
// count nothing: counters only go up.
func (r *Recorder) Add(metric string, n int64) {
	if n <= 0 {
		return
	}
	if i := slotOf(metric); i >= 0 {
		r.add(i, n)
		return
	}
	if !validMetric(metric) {
		return
	}
	h := hourOf(r.cfg.Now())
	r.mu.Lock()
	r.hold(hourMetric{h, metric}, n)
	r.mu.Unlock()
}

// ObserveIdempotency counts one guard decision (the Guard's Observe
// signature): replayed in Replays, in_progress and mismatch in Conflicts,
// pending in Pending, anything else in none. Every guarded operation counts
// (the licenses routes and the vendor's webhooks alike).
func (r *Recorder) ObserveIdempotency(_, outcome string) {
	switch outcome {
	case "replayed":
		r.add(iReplays, 1)
	case "in_progress", "mismatch":
		r.add(iConflicts, 1)
	case "pending":
		r.add(iPending, 1)
	}
}

// add counts n of the known metric i in the hour the clock says now.
func (r *Recorder) add(i int, n int64) {
	h := hourOf(r.cfg.Now())
	s := &r.slots[i].v
	if h < 1 || h > maxTag {
		r.slow(i, h, n) // a clock before 1970 or past the slot's range
		return
	}
	for {
		v := s.Load()
		tag, c := unpack(v)
		if tag != h || uint64(c)+uint64(n) > countMask {
			r.slow(i, h, n)
			return
		}
		if s.CompareAndSwap(v, v+uint64(n)) {
			return
		}
	}
}

// slow counts n of the known metric i in hour h when its slot counts
// another hour: it moves the slot on to h when h is later (holding what the
// slot counted for its hour), and holds n for h when h is earlier (an Add
// that read the clock before the hour turned and counts after another
// moved the slot on). A count too large for the slot is held too.
func (r *Recorder) slow(i int, h, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.slots[i].v
	for {
		v := s.Load()
		tag, c := unpack(v)
		switch {
		case h < 1 || h > maxTag || tag > h || tag == h && uint64(c)+uint64(n) > countMask:
			r.hold(hourMetric{h, known[i]}, n)
			return
		case tag == h:
			if s.CompareAndSwap(v, v+uint64(n)) {
				return
			}
		default: // tag < h: the slot moves on to h
			if s.CompareAndSwap(v, pack(h, uint64(n))) {
				if c > 0 {
					r.hold(hourMetric{tag, known[i]}, c)
				}
				return
			}
		}
	}
}

// hold adds n to the held count of k; r.mu is held.
func (r *Recorder) hold(k hourMetric, n int64) {
	r.held[k] += n
	if len(r.held) > maxHeld+maxHeld/4 { // trimmed in steps, not at each new key
		r.trim()
	}
}

// trim drops the oldest hours held past maxHeld, counting what it drops
// for the next flush's warning; r.mu is held.
func (r *Recorder) trim() {
	if len(r.held) <= maxHeld {
		return
	}
	keys := make([]hourMetric, 0, len(r.held))
	for k := range r.held {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b hourMetric) int { return cmp.Compare(a.hour, b.hour) })
	for _, k := range keys[:len(keys)-maxHeld] {
		r.dropped += r.held[k]
		delete(r.held, k)
	}
}

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
	return r.cfg.Retry(ctx, func() *gorm.DB {
		return &gorm.DB{Error: r.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			for _, c := range cs {
				if err := database.AddActivityHour(ctx, tx, hourStart(c.hour), c.metric, c.n).Error; err != nil {
					return err
				}
			}
			return nil
		})}
	}).Error
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
