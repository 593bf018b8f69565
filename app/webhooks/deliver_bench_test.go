package webhooks

import (
	"fmt"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// BenchmarkDeliver sends 500 deliveries to a local receiver that answers
// 204 at once, through the whole worker (claim, sign, POST, record), on
// SQLite (and on MySQL with TEST_MYSQL_DSN); it reports deliveries/s.
func BenchmarkDeliver(b *testing.B) {
	for _, dialect := range []string{database.SQLite, database.MySQL} {
		b.Run(dialect, func(b *testing.B) {
			db := testdb.New(b, dialect)
			r := newRig(b, db, Config{})
			rc := newReceiver(b, nil)
			c := r.consumer("ca")
			r.endpoint(c, rc.url())
			const n = 500
			for i := range n {
				r.license(c, fmt.Sprintf("s%d.test", i))
			}
			r.dispatch()
			var sent int
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				if err := db.Gorm.Exec("UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, claim = NULL",
					StatusPending, r.clock.Now()).Error; err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				began := time.Now()
				sent += r.deliver()
				took += time.Since(began)
			}
			if sent%n != 0 {
				b.Fatalf("sent %d, want a multiple of %d", sent, n)
			}
			b.ReportMetric(float64(sent)/took.Seconds(), "deliveries/s")
		})
	}
}
