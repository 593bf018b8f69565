package licenses

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/tests/testdb"
)

// noOutbox writes no event: the create as it was before the outbox, for the
// benchmark's comparison only (a Service always has its events).
type noOutbox struct{}

func (noOutbox) Seal(events.Draft) (events.Event, error) { return events.Event{}, nil }
func (noOutbox) Insert(*gorm.DB, *events.Event) error    { return nil }

// BenchmarkCreateOutbox is a create (the vendor in memory) with its consumer
// event written in its transaction, and without: what the outbox row costs a
// create, on each database. The two cases alternate, round by round, on one
// database (a shared machine's noise falls on both), and the benchmark
// reports each one's median create time and their ratio (outbox/none: 1.10
// is a create 10 % slower).
//
//	TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' go test -run '^$' -bench CreateOutbox -benchtime 1x ./app/licenses/
func BenchmarkCreateOutbox(b *testing.B) {
	const rounds, perRound = 9, 300
	for _, dialect := range []string{"sqlite", "mysql"} {
		if dialect == "mysql" && os.Getenv("TEST_MYSQL_DSN") == "" {
			continue
		}
		b.Run(dialect, func(b *testing.B) {
			db := testdb.New(b, dialect)
			seedConsumer(b, db, "c1")
			cipher := testCipher(b, 1)
			services := map[string]*Service{}
			for name, outbox := range map[string]Outbox{"outbox": events.New(db.Gorm, db.Read, cipher), "none": noOutbox{}} {
				services[name] = New(Config{DB: db.Gorm, Read: db.Read, Vendor: newVendor(), Cipher: cipher, Events: outbox})
			}
			ctx := context.Background()
			took := map[string][]time.Duration{}
			n := 0
			for b.Loop() {
				for round := range rounds {
					order := []string{"outbox", "none"}
					if round%2 == 1 {
						order = []string{"none", "outbox"}
					}
					for _, name := range order {
						start := time.Now()
						for range perRound {
							n++
							if _, _, err := services[name].create(ctx, "c1", Input{Name: "Shop", Domain: fmt.Sprintf("d%d.test", n)}, "", nil); err != nil {
								b.Fatal(err)
							}
						}
						took[name] = append(took[name], time.Since(start)/perRound)
					}
				}
			}
			median := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
			with, without := median(took["outbox"]), median(took["none"])
			b.ReportMetric(float64(with.Microseconds()), "µs/create-outbox")
			b.ReportMetric(float64(without.Microseconds()), "µs/create-none")
			b.ReportMetric(float64(with)/float64(without), "outbox/none")
		})
	}
}
