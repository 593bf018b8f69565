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
	"context"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"
)

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
