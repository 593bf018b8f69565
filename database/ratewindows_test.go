package database_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// rateWindow is the start of a counting window (a consumer's first hit).
var rateWindow = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// rateConsumer is a consumer id of the length the rate_limits table takes.
const rateConsumer = "01J00000000000000000000001"

// HitRateWindow hands back each window's count, this hit included, and its
// start, per consumer; a window runs a minute from its first hit, and the
// first hit after it starts the next (concurrent hits: see
// TestHitRateWindowCountsSeveralAtOnce).
func TestHitRateWindowCounts(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		hit := func(consumer string, now time.Time) (int64, time.Time) {
			t.Helper()
			var hits int64
			var start time.Time
			if err := database.HitRateWindow(ctx, db.Gorm, consumer, now, time.Minute, 1, &hits, &start).Error; err != nil {
				t.Fatalf("HitRateWindow: %v", err)
			}
			if start.IsZero() {
				if err := database.RateWindowStart(ctx, db.Gorm, consumer, &start).Error; err != nil {
					t.Fatalf("RateWindowStart: %v", err)
				}
			}
			return hits, start
		}
		for i, at := range []time.Time{rateWindow, rateWindow.Add(30 * time.Second), rateWindow.Add(59*time.Second + 900*time.Millisecond)} {
			if got, start := hit(rateConsumer, at); got != int64(i+1) || !start.Equal(rateWindow) {
				t.Errorf("hit %d: count = %d, start %v; want %d, %v", i+1, got, start, i+1, rateWindow)
			}
		}
		if got, _ := hit("01J00000000000000000000002", rateWindow); got != 1 {
			t.Errorf("another consumer: count = %d, want 1", got)
		}
		next := rateWindow.Add(time.Minute + 1500*time.Millisecond)
		if got, start := hit(rateConsumer, next); got != 1 || !start.Equal(next.Truncate(time.Second)) {
			t.Errorf("after the window: count = %d, start %v; want 1 from %v", got, start, next.Truncate(time.Second))
		}
		if got, start := hit(rateConsumer, next.Add(58*time.Second)); got != 2 || !start.Equal(next.Truncate(time.Second)) {
			t.Errorf("in the next window: count = %d, start %v; want 2", got, start)
		}
	})
}

// HitRateWindow with n counts n hits at once, on a new row and on one that
// exists, and concurrent reservations each get a range of their own: for
// single hits, a count of their own.
func TestHitRateWindowCountsSeveralAtOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		hit := func(now time.Time, n int64) int64 {
			t.Helper()
			var hits int64
			var start time.Time
			res := database.RetryOnConflict(ctx, func() *gorm.DB {
				return database.HitRateWindow(ctx, db.Gorm, rateConsumer, now, time.Minute, n, &hits, &start)
			})
			if res.Error != nil {
				t.Fatalf("HitRateWindow(%d): %v", n, res.Error)
			}
			return hits
		}
		if got := hit(rateWindow, 5); got != 5 {
			t.Errorf("5 on a new row: count = %d", got)
		}
		if got := hit(rateWindow, 1); got != 6 {
			t.Errorf("then 1: count = %d, want 6", got)
		}
		if got := hit(rateWindow, 10); got != 16 {
			t.Errorf("then 10: count = %d, want 16", got)
		}

		const workers, each = 6, 8
		for i, n := range []int64{1, 4} {
			var mu sync.Mutex
			taken := map[int64]bool{}
			var wg sync.WaitGroup
			window := rateWindow.Add(time.Duration(2+i) * time.Minute) // a new window
			for range workers {
				wg.Go(func() {
					for range each {
						end := hit(window, n)
						mu.Lock()
						for v := end - n + 1; v <= end; v++ {
							if taken[v] {
								t.Errorf("%d at once: count %d reserved twice", n, v)
							}
							taken[v] = true
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(taken) != workers*each*int(n) || !taken[1] || !taken[workers*each*n] {
				t.Errorf("%d at once: %d counts reserved, want 1..%d each once", n, len(taken), workers*each*n)
			}
		}
	})
}

// PruneRateWindows deletes at most limit rows of the windows that started
// before the time given, and says how many.
func TestPruneRateWindowsDeletesABatchOfPastWindows(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		var hits int64
		var start time.Time
		for i, consumer := range []string{"01J00000000000000000000011", "01J00000000000000000000012", "01J00000000000000000000013",
			"01J00000000000000000000014", rateConsumer, "01J00000000000000000000002"} {
			at := rateWindow.Add(time.Duration(i/2) * time.Minute) // two rows in each of three windows
			if err := database.HitRateWindow(ctx, db.Gorm, consumer, at, time.Minute, 1, &hits, &start).Error; err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
		}
		before := rateWindow.Add(2 * time.Minute) // four rows are older
		for i, want := range []int64{3, 1, 0} {
			res := database.PruneRateWindows(ctx, db.Gorm, before, 3)
			if res.Error != nil {
				t.Fatalf("prune %d: %v", i+1, res.Error)
			}
			if res.RowsAffected != want {
				t.Errorf("prune %d deleted %d rows, want %d", i+1, res.RowsAffected, want)
			}
		}
		var left int64
		if err := db.Gorm.Table("rate_limits").Count(&left).Error; err != nil {
			t.Fatal(err)
		}
		if left != 2 {
			t.Errorf("rows left = %d, want the current window's 2", left)
		}
	})
}

// The upsert is prepared on the pool Open made: a *gorm.DB of another
// making is refused, not counted on.
func TestHitRateWindowNeedsADatabaseOpenOpened(t *testing.T) {
	var hits int64
	var start time.Time
	err := database.HitRateWindow(context.Background(), &gorm.DB{Config: &gorm.Config{}}, rateConsumer, rateWindow, time.Minute, 1, &hits, &start).Error
	if err == nil || hits != 0 {
		t.Errorf("HitRateWindow on a database Open did not open: %v, %d hits", err, hits)
	}
}
