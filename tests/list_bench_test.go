package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// BenchmarkLicenseList compares the offset list (COUNT, then OFFSET to the
// page) with the keyset cursor page (no COUNT, no OFFSET), for the last page
// of a consumer with 1k and 100k licenses, on SQLite:
//
//	go test -run '^$' -bench LicenseList -benchtime 200x ./tests/
//
// The offset list grows with the depth and the total; the cursor page stays
// flat.
func BenchmarkLicenseList(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			db := testdb.New(b, "sqlite")
			app, err := console.Bootstrap(context.Background(), testConfig("http://127.0.0.1:1"), console.NewLogger(testConfig(""), &testkit.Buffer{}), console.Overrides{DB: db.Gorm, Read: db.Read})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = app.Close() })
			ctx := context.Background()
			if _, err := app.Auth.Issue(ctx, audit.Console(), auth.IssueInput{Consumer: "acme", Abilities: []string{auth.LicensesRead}}); err != nil {
				b.Fatal(err)
			}
			consumer, err := app.Auth.ConsumerNamed(ctx, "acme")
			if err != nil {
				b.Fatal(err)
			}
			seedLicenses(b, db, consumer.ID, n)
			const perPage = 15
			lastPage := (n + perPage - 1) / perPage
			// The cursor of the row just before the last page, as the page
			// before it would hand out.
			var boundary licenses.License
			if err := db.Gorm.Where("consumer_id = ?", consumer.ID).Order("created_at DESC, id DESC").
				Offset((lastPage-1)*perPage - 1).Limit(1).Take(&boundary).Error; err != nil {
				b.Fatal(err)
			}
			cur := &licenses.Cursor{CreatedAt: boundary.CreatedAt, ID: boundary.ID, Next: true}
			b.Run("offset-first", func(b *testing.B) {
				for b.Loop() {
					if _, err := app.Licenses.List(ctx, consumer.ID, 1, perPage); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("offset-last", func(b *testing.B) {
				for b.Loop() {
					p, err := app.Licenses.List(ctx, consumer.ID, lastPage, perPage)
					if err != nil || len(p.Licenses) == 0 {
						b.Fatal(err, len(p.Licenses))
					}
				}
			})
			b.Run("cursor-first", func(b *testing.B) {
				for b.Loop() {
					if _, err := app.Licenses.ListCursor(ctx, consumer.ID, nil, perPage); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("cursor-last", func(b *testing.B) {
				for b.Loop() {
					p, err := app.Licenses.ListCursor(ctx, consumer.ID, cur, perPage)
					if err != nil || len(p.Licenses) == 0 || p.More {
						b.Fatal(err, len(p.Licenses), p.More)
					}
				}
			})
		})
	}
}

// seedLicenses writes n active licenses of the consumer, one a second
// apart, in batches. Their keys are plaintext, which the service reads as
// it is: the benchmark measures the queries.
func seedLicenses(b *testing.B, db *testdb.DB, consumerID string, n int) {
	b.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]licenses.License, 0, n)
	for i := range n {
		at := start.Add(time.Duration(i) * time.Second)
		domain := fmt.Sprintf("shop%06d.test", i)
		rows = append(rows, licenses.License{
			ID: fmt.Sprintf("01BENCH%019d", i), ConsumerID: consumerID, Name: "N", Domain: domain, ActiveDomain: &domain,
			LicenseKey: "LK-plain", Status: licenses.StatusActive, VendorSiteID: fmt.Sprintf("site_%d", i), CreatedAt: at, UpdatedAt: at,
		})
	}
	if err := db.Gorm.CreateInBatches(rows, 500).Error; err != nil {
		b.Fatal(err)
	}
}
