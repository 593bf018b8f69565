package database_test

import (
	"context"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// ProbeWrite succeeds on a database that takes writes and leaves no row
// behind; on one without the table it fails.
func TestProbeWrite(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		if err := database.ProbeWrite(context.Background(), db.Gorm, time.Now()); err != nil {
			t.Fatalf("ProbeWrite: %v", err)
		}
		var rows int64
		if err := db.Gorm.Table("readiness_probes").Count(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if rows != 0 {
			t.Errorf("%d probe rows left behind", rows)
		}
	})
	empty := testdb.Empty(t, database.SQLite)
	if err := database.ProbeWrite(context.Background(), empty.Gorm, time.Now()); err == nil {
		t.Error("ProbeWrite on a database without readiness_probes succeeded")
	}
}
