package activity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// ten30 is the tests' clock at start: half past ten, UTC.
var ten30 = time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)

// at is the hour of ten30 moved by d hours, as stored() keys it.
func at(d int) string {
	return ten30.Truncate(time.Hour).Add(time.Duration(d) * time.Hour).Format("15h")
}

// newRecorder is a Recorder on the test's database and clock, logging to log
// (nil: nowhere).
func newRecorder(db *gorm.DB, read *gorm.DB, clk *testkit.Clock, log *slog.Logger) *Recorder {
	return New(Config{DB: db, Read: read, Now: clk.Now, Log: log, Retry: database.RetryOnConflict})
}

// stored reads every row of activity_hours, keyed "15h metric".
func stored(t *testing.T, db *gorm.DB) map[string]int64 {
	t.Helper()
	var rows []row
	if err := db.Raw("SELECT `hour`, metric, `count` FROM activity_hours").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		if r.Hour.Minute() != 0 || r.Hour.Second() != 0 || r.Hour.Nanosecond() != 0 {
			t.Errorf("row of %s at %v: not the start of an hour", r.Metric, r.Hour)
		}
		out[r.Hour.UTC().Format("15h")+" "+r.Metric] += r.Count
	}
	return out
}

func wantStored(t *testing.T, db *gorm.DB, want map[string]int64) {
	t.Helper()
	got := stored(t, db)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("activity_hours holds %v, want %v", got, want)
	}
}

func flush(t *testing.T, r *Recorder) {
	t.Helper()
	if err := r.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// Counts added from many goroutines at once, while flushes run and the
// hour turns, add up to their sum once flushed: none lost, none twice.
func TestConcurrentAddsEqualTheSumAfterAFlush(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(ten30)
		r := newRecorder(db.Gorm, db.Read, clk, nil)
		const workers, each = 8, 3000
		ctx, stop := context.WithCancel(context.Background())
		var flushes sync.WaitGroup
		flushes.Go(func() {
			for ctx.Err() == nil {
				if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("flush: %v", err)
				}
			}
		})
		var adders sync.WaitGroup
		for w := range workers {
			adders.Go(func() {
				for i := range each {
					if w == 0 && i == each/2 {
						clk.Advance(time.Hour) // the hour turns while the others count
					}
					r.Add(Replays, 1)
					r.Add(Creates, 2)
					r.ObserveIdempotency("licenses.store", "mismatch")
					r.Add("custom.metric", 1)
				}
			})
		}
		adders.Wait()
		stop()
		flushes.Wait()
		flush(t, r)
		sums := map[string]int64{}
		for k, n := range stored(t, db.Gorm) {
			_, metric, _ := strings.Cut(k, " ")
			sums[metric] += n
		}
		want := map[string]int64{Replays: workers * each, Creates: 2 * workers * each, Conflicts: workers * each, "custom.metric": workers * each}
		if fmt.Sprint(sums) != fmt.Sprint(want) {
			t.Errorf("after the flushes the table sums to %v, want %v", sums, want)
		}
	})
}

// Two replicas on one database, each with its own Recorder, flushing at the
// same time: their counts add up in the hour's row.
func TestTwoReplicasAddUp(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		other, err := database.Open(context.Background(), db.Config)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = database.Close(other) })
		clk := testkit.NewClock(ten30)
		replicas := []*Recorder{newRecorder(db.Gorm, db.Read, clk, nil), newRecorder(other, other, clk, nil)}
		for round := range 5 {
			var wg sync.WaitGroup
			for i, r := range replicas {
				wg.Go(func() {
					for range 100 * (i + 1) {
						r.Add(Replays, 1)
					}
					r.Add("custom.metric", int64(round+1))
					if err := r.Flush(context.Background()); err != nil {
						t.Errorf("replica %d: flush: %v", i, err)
					}
				})
			}
			wg.Wait()
		}
		wantStored(t, db.Gorm, map[string]int64{at(0) + " " + Replays: 5 * 300, at(0) + " custom.metric": 2 * 15})
	})
}

// A count belongs to the hour in which Add read the clock: one made just
// before the hour turned lands in that hour, even when it is counted after
// another Add moved on to the next hour.
func TestACountBelongsToTheHourOfItsAdd(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		justBefore := ten30.Truncate(time.Hour).Add(time.Hour - time.Nanosecond) // 10:59:59.999999999
		clk := testkit.NewClock(justBefore)
		r := newRecorder(db.Gorm, db.Read, clk, nil)
		r.Add(Creates, 1)
		r.Add("custom.metric", 1)
		clk.Advance(time.Nanosecond) // 11:00
		r.Add(Creates, 10)
		r.Add("custom.metric", 10)
		// An Add that read the clock at 10:59:59.999… and counts now, after
		// the slot moved on to 11:00.
		clk.Set(justBefore)
		r.Add(Creates, 100)
		clk.Set(justBefore.Add(time.Nanosecond))
		series, err := r.Series(context.Background(), []string{Creates, "custom.metric"}, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(series[Creates]); got != fmt.Sprint([]Point{{hourStart(hourOf(ten30)), 101}, {hourStart(hourOf(ten30) + 1), 10}}) {
			t.Errorf("unflushed series of %s = %v, want 101 at 10:00 and 10 at 11:00", Creates, got)
		}
		flush(t, r)
		wantStored(t, db.Gorm, map[string]int64{
			at(0) + " " + Creates: 101, at(1) + " " + Creates: 10,
			at(0) + " custom.metric": 1, at(1) + " custom.metric": 10,
		})
	})
}

// A flush that fails (the table gone: the database refuses the write) keeps
// its counts in memory, and Series still shows them; the next flush that
// succeeds writes them once. Run logs the failure at Warn and tries again.
func TestAFailedFlushKeepsTheCounts(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		clk := testkit.NewClock(ten30)
		r := newRecorder(db.Gorm, db.Read, clk, nil)
		r.Add(Replays, 3)
		r.Add("custom.metric", 2)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := r.Flush(cancelled); err == nil {
			t.Fatal("a flush on a cancelled context succeeded")
		}
		wantStored(t, db.Gorm, map[string]int64{})
		hide(t, db.Gorm)
		if err := r.Flush(ctx); err == nil {
			t.Fatal("a flush to a missing table succeeded")
		}
		unhide(t, db.Gorm)
		wantStored(t, db.Gorm, map[string]int64{})
		series, err := r.Series(ctx, []string{Replays}, 1)
		if err != nil || series[Replays][0].Count != 3 {
			t.Errorf("series after the failed flushes = %v, %v; want the 3 replays held", series, err)
		}
		flush(t, r)
		flush(t, r)
		wantStored(t, db.Gorm, map[string]int64{at(0) + " " + Replays: 3, at(0) + " custom.metric": 2})

		// Run: a failing flush is logged at Warn and its counts written
		// once the table is back.
		logs := &testkit.Buffer{}
		r = New(Config{DB: db.Gorm, Read: db.Read, Now: clk.Now, Log: slog.New(slog.NewTextHandler(logs, nil)), Interval: time.Millisecond})
		hide(t, db.Gorm)
		r.Add(Pending, 5)
		runCtx, stop := context.WithCancel(ctx)
		var run sync.WaitGroup
		run.Go(func() { r.Run(runCtx) })
		testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "activity flush failed") },
			"Run logged no failed flush:\n%s", logs)
		if line := logs.String(); !strings.Contains(line, "level=WARN") || strings.Contains(line, "password") {
			t.Errorf("the failed flush's log: %s", line)
		}
		unhide(t, db.Gorm)
		testkit.Eventually(t, 10*time.Second, func() bool { return stored(t, db.Gorm)[at(0)+" "+Pending] == 5 },
			"Run did not write the held counts once the table was back")
		stop()
		run.Wait()
		wantStored(t, db.Gorm, map[string]int64{at(0) + " " + Replays: 3, at(0) + " custom.metric": 2, at(0) + " " + Pending: 5})
	})
}

// hide renames activity_hours away, so that every write to it fails; unhide
// brings it back.
func hide(t *testing.T, db *gorm.DB) {
	t.Helper()
	if err := db.Exec("ALTER TABLE activity_hours RENAME TO activity_hours_away").Error; err != nil {
		t.Fatal(err)
	}
}

func unhide(t *testing.T, db *gorm.DB) {
	t.Helper()
	if err := db.Exec("ALTER TABLE activity_hours_away RENAME TO activity_hours").Error; err != nil {
		t.Fatal(err)
	}
}

// Run flushes once more as its context ends: what was counted since the
// last tick is kept.
func TestRunFlushesAsItStops(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(ten30)
		r := New(Config{DB: db.Gorm, Now: clk.Now, Interval: time.Hour})
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		r.Add(Creates, 7)
		stop()
		<-done
		wantStored(t, db.Gorm, map[string]int64{at(0) + " " + Creates: 7})
	})
}

// Memory is bounded while flushes fail: past the bound the oldest hours are
// dropped, the drop is logged at Warn, and what is kept is written once the
// database takes it.
func TestHeldCountsAreBounded(t *testing.T) {
	db := testdb.New(t, database.SQLite)
	clk := testkit.NewClock(ten30)
	logs := &testkit.Buffer{}
	r := newRecorder(db.Gorm, db.Read, clk, slog.New(slog.NewTextHandler(logs, nil)))
	const hours = 3 * maxHeld
	for range hours {
		r.Add(Replays, 1) // each new hour holds the last one's count
		r.Add("custom.metric", 1)
		clk.Advance(time.Hour)
	}
	hide(t, db.Gorm)
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("a flush to a missing table succeeded")
	}
	r.mu.Lock()
	held := len(r.held)
	r.mu.Unlock()
	if held > maxHeld {
		t.Errorf("%d hour counts held after a failed flush, want at most %d", held, maxHeld)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "activity counts dropped") {
		t.Errorf("no warning of the dropped counts:\n%s", logs)
	}
	unhide(t, db.Gorm)
	flush(t, r)
	var rows, total int64
	if err := db.Gorm.Raw("SELECT COUNT(*), SUM(`count`) FROM activity_hours").Row().Scan(&rows, &total); err != nil {
		t.Fatal(err)
	}
	if rows != maxHeld || total != maxHeld {
		t.Errorf("%d rows counting %d written, want the newest %d hour counts", rows, total, maxHeld)
	}
	var newest time.Time
	if err := db.Gorm.Raw("SELECT MAX(`hour`) FROM activity_hours").Row().Scan(database.NotNullTime(&newest)); err != nil {
		t.Fatal(err)
	}
	if want := hourStart(hourOf(clk.Now()) - 1); !newest.Equal(want) {
		t.Errorf("newest hour written %v, want %v: the newest are kept", newest, want)
	}
}

// Series has every hour of the window, oldest first, zeros where nothing
// was counted, the flushed counts and those this process holds, each once.
func TestSeriesFillsHoursAndIncludesUnflushedCounts(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		clk := testkit.NewClock(ten30.Add(-3 * time.Hour)) // 07:30: outside the window
		r := newRecorder(db.Gorm, db.Read, clk, nil)
		r.Add(Creates, 50)
		clk.Set(ten30.Add(-time.Hour)) // 09:30
		r.Add(Creates, 2)
		flush(t, r)
		clk.Set(ten30.Add(time.Hour + 15*time.Minute)) // 11:45
		r.Add(Creates, 1)
		r.Add(Replays, 4)
		want := func(counts ...int64) []Point {
			ps := make([]Point, len(counts))
			for i, n := range counts {
				ps[i] = Point{Hour: time.Date(2026, 12, 1, 8+i, 0, 0, 0, time.UTC), Count: n}
			}
			return ps
		}
		for _, when := range []string{"before the flush", "after it"} {
			got, err := r.Series(ctx, []string{Creates, Replays, Pending}, 4)
			if err != nil {
				t.Fatal(err)
			}
			for m, w := range map[string][]Point{Creates: want(0, 2, 0, 1), Replays: want(0, 0, 0, 4), Pending: want(0, 0, 0, 0)} {
				if fmt.Sprint(got[m]) != fmt.Sprint(w) {
					t.Errorf("%s: series of %s = %v, want %v", when, m, got[m], w)
				}
				for _, p := range got[m] {
					if p.Hour.Location() != time.UTC {
						t.Errorf("%s: hour %v is not UTC", when, p.Hour)
					}
				}
			}
			flush(t, r)
		}
		if _, err := r.Series(ctx, []string{Creates}, 0); err == nil {
			t.Error("a series of 0 hours did not fail")
		}
	})
}

// Set replaces the hour's value of a gauge; Latest reads the newest row.
func TestSetReplacesAndLatestReadsTheNewest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		clk := testkit.NewClock(ten30)
		r := newRecorder(db.Gorm, db.Read, clk, nil)
		if _, _, ok, err := r.Latest(ctx, DriftMismatches); ok || err != nil {
			t.Errorf("Latest of nothing written = ok %v, %v", ok, err)
		}
		for _, n := range []int64{4, 2} {
			if err := r.Set(ctx, DriftMismatches, n); err != nil {
				t.Fatal(err)
			}
		}
		if v, hour, ok, err := r.Latest(ctx, DriftMismatches); err != nil || !ok || v != 2 || !hour.Equal(ten30.Truncate(time.Hour)) {
			t.Errorf("Latest = %d at %v (ok %v, %v), want 2 at 10:00", v, hour, ok, err)
		}
		clk.Advance(time.Hour)
		if err := r.Set(ctx, DriftKind("site_gone"), 0); err != nil {
			t.Fatal(err)
		}
		if err := r.Set(ctx, DriftMismatches, 0); err != nil {
			t.Fatal(err)
		}
		if v, hour, ok, err := r.Latest(ctx, DriftMismatches); err != nil || !ok || v != 0 || !hour.Equal(ten30.Truncate(time.Hour).Add(time.Hour)) {
			t.Errorf("Latest = %d at %v (ok %v, %v), want 0 at 11:00", v, hour, ok, err)
		}
		wantStored(t, db.Gorm, map[string]int64{at(0) + " " + DriftMismatches: 2, at(1) + " " + DriftMismatches: 0, at(1) + " drift.site_gone": 0})
		if err := r.Set(ctx, "no spaces", 1); !errors.Is(err, ErrInvalidMetric) {
			t.Errorf("Set of an invalid name = %v, want ErrInvalidMetric", err)
		}
	})
}

// Prune deletes the hours that started before its bound, and no others.
func TestPruneDeletesOlderHours(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(ten30.Add(-4 * time.Hour))
		r := newRecorder(db.Gorm, db.Read, clk, nil)
		for range 5 { // 06:30 to 10:30
			r.Add(Creates, 1)
			r.Add(Replays, 1)
			clk.Advance(time.Hour)
		}
		flush(t, r)
		n, err := r.Prune(context.Background(), ten30.Add(-2*time.Hour)) // 08:30: 06:00, 07:00 and 08:00 started before it
		if err != nil || n != 6 {
			t.Fatalf("Prune = %d, %v; want 6 rows", n, err)
		}
		wantStored(t, db.Gorm, map[string]int64{at(-1) + " " + Creates: 1, at(-1) + " " + Replays: 1, at(0) + " " + Creates: 1, at(0) + " " + Replays: 1})
	})
}

// Each guard outcome counts in its metric, or in none; names the table
// cannot hold, and counts that are not positive, count nothing.
func TestWhatCounts(t *testing.T) {
	clk := testkit.NewClock(ten30)
	r := New(Config{Now: clk.Now}) // nothing is written
	for outcome, metric := range map[string]string{"replayed": Replays, "in_progress": Conflicts, "mismatch": Conflicts, "pending": Pending,
		"executed": "", "taken_over": "", "released": "", "not_kept": "", "superseded": "", "discarded": ""} {
		before := peekSums(r)
		r.ObserveIdempotency("licenses.store", outcome)
		after := peekSums(r)
		for _, m := range known {
			want := before[m]
			if m == metric {
				want++
			}
			if after[m] != want {
				t.Errorf("outcome %s: %s went from %d to %d, want %d", outcome, m, before[m], after[m], want)
			}
		}
	}
	before := fmt.Sprint(peekSums(r))
	for _, name := range []string{"", strings.Repeat("m", MaxMetricLen+1), "with space", "é.metric"} {
		r.Add(name, 1)
	}
	r.Add(Creates, 0)
	r.Add(Creates, -3)
	if after := fmt.Sprint(peekSums(r)); after != before {
		t.Errorf("invalid adds changed the counts: %s, then %s", before, after)
	}
}

// peekSums is what r holds, by metric.
func peekSums(r *Recorder) map[string]int64 {
	out := map[string]int64{}
	for _, rw := range r.peek() {
		out[rw.Metric] += rw.Count
	}
	return out
}

// Add of a known metric, and a guard decision, allocate nothing: they are
// on every request's path.
func TestAddAllocatesNothing(t *testing.T) {
	r := New(Config{})
	if n := testing.AllocsPerRun(1000, func() {
		r.Add(Replays, 1)
		r.ObserveIdempotency("licenses.store", "replayed")
	}); n != 0 {
		t.Errorf("Add allocates %v times a call, want 0", n)
	}
}

func BenchmarkAdd(b *testing.B) {
	r := New(Config{})
	b.ReportAllocs()
	for b.Loop() {
		r.Add(Replays, 1)
	}
}

// BenchmarkAddParallel is the replay path under load: every goroutine
// counting the same metric.
func BenchmarkAddParallel(b *testing.B) {
	r := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.ObserveIdempotency("licenses.store", "replayed")
		}
	})
}

// BenchmarkAddOtherParallel is a metric without a slot: under the mutex.
func BenchmarkAddOtherParallel(b *testing.B) {
	r := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Add("custom.metric", 1)
		}
	})
}
