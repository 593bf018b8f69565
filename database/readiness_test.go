package database_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// Readiness names the check that fails: on SQLite "disk" when nothing can
// be written beside the database file (here its directory is gone, which a
// root test can make happen where permissions would not bite: SQLite goes
// on writing to the files it holds open), "database" when the probe row
// cannot be written; on either dialect nil while both succeed, leaving no
// file and no row behind.
func TestReadinessNamesTheFailingCheck(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := database.NewReadiness(db.Gorm, time.Now)
		if err := r.Check(context.Background()); err != nil {
			t.Fatalf("Check on a healthy database: %v", err)
		}
		if db.Dialect != database.SQLite {
			return
		}
		dir := filepath.Dir(db.Config.Database)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".readyz-") {
				t.Errorf("the disk check left %s behind", e.Name())
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := database.ProbeWrite(context.Background(), db.Gorm, time.Now()); err != nil {
			t.Fatalf("the probe row should still be written to the open files: %v", err)
		}
		err = r.Check(context.Background())
		if !errors.Is(err, database.ErrDiskNotReady) {
			t.Errorf("Check with the database's directory gone = %v, want ErrDiskNotReady", err)
		}
	})
	empty := testdb.Empty(t, database.SQLite)
	err := database.NewReadiness(empty.Gorm, nil).Check(context.Background())
	if !errors.Is(err, database.ErrDatabaseNotReady) {
		t.Errorf("Check without readiness_probes = %v, want ErrDatabaseNotReady", err)
	}
}
