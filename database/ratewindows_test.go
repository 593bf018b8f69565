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

// rateWindow is the start of a counting window.
var rateWindow = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

// rateConsumer is a consumer id of the length the rate_limits table takes.
const rateConsumer = "01J00000000000000000000001"

// HitRateWindow hands back each window's count, this hit included, per
// consumer and window; concurrent hits each get a count of their own.
func TestHitRateWindowCounts(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		hit := func(consumer string, window time.Time) int64 {
			t.Helper()
			var hits int64
			if err := database.HitRateWindow(ctx, db.Gorm, consumer, window, 1, &hits).Error; err != nil {
				t.Fatalf("HitRateWindow: %v", err)
			}
			return hits
		}
		for want := int64(1); want <= 3; want++ {
			if got := hit(rateConsumer, rateWindow); got != want {
				t.Errorf("hit %d: count = %d", want, got)
			}
		}
		if got := hit("01J00000000000000000000002", rateWindow); got != 1 {
			t.Errorf("another consumer: count = %d, want 1", got)
		}
		if got := hit(rateConsumer, rateWindow.Add(time.Minute)); got != 1 {
			t.Errorf("another window: count = %d, want 1", got)
		}

		const workers, each = 8, 10
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					var hits int64
					res := database.RetryOnConflict(ctx, func() *gorm.DB {
						return database.HitRateWindow(ctx, db.Gorm, rateConsumer, rateWindow.Add(2*time.Minute), 1, &hits)
					})
					if res.Error != nil {
						t.Error(res.Error)
						return
					}
					mu.Lock()
					seen[hits] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != workers*each {
			t.Errorf("%d distinct counts, want %d: a hit was lost or shared", len(seen), workers*each)
		}
	})
}

// HitRateWindow with n counts n hits at once, on a new row and on one that
// exists, and concurrent reservations each get a range of their own.
func TestHitRateWindowCountsSeveralAtOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		hit := func(window time.Time, n int64) int64 {
			t.Helper()
			var hits int64
			res := database.RetryOnConflict(ctx, func() *gorm.DB {
				return database.HitRateWindow(ctx, db.Gorm, rateConsumer, window, n, &hits)
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

		const workers, each, n = 6, 8, 4
		var mu sync.Mutex
		taken := map[int64]bool{}
		var wg sync.WaitGroup
		window := rateWindow.Add(time.Minute)
		for range workers {
			wg.Go(func() {
				for range each {
					end := hit(window, n)
					mu.Lock()
					for v := end - n + 1; v <= end; v++ {
						if taken[v] {
							t.Errorf("count %d reserved twice", v)
						}
						taken[v] = true
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(taken) != workers*each*n || !taken[1] || !taken[workers*each*n] {
			t.Errorf("%d counts reserved, want 1..%d each once", len(taken), workers*each*n)
		}
	})
}

// PruneRateWindows deletes at most limit rows of the windows before the one
// given, and says how many.
func TestPruneRateWindowsDeletesABatchOfPastWindows(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		var hits int64
		for i, window := range []time.Time{rateWindow, rateWindow.Add(time.Minute), rateWindow.Add(2 * time.Minute)} {
			for _, consumer := range []string{rateConsumer, "01J00000000000000000000002"} {
				if err := database.HitRateWindow(ctx, db.Gorm, consumer, window, 1, &hits).Error; err != nil {
					t.Fatalf("window %d: %v", i, err)
				}
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
	err := database.HitRateWindow(context.Background(), &gorm.DB{Config: &gorm.Config{}}, rateConsumer, rateWindow, 1, &hits).Error
	if err == nil || hits != 0 {
		t.Errorf("HitRateWindow on a database Open did not open: %v, %d hits", err, hits)
	}
}
