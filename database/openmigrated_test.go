package database_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Several processes starting at once on a fresh SQLite file all end up with
// the migrated schema, each migration applied exactly once; none fails on a
// lock (SQLITE_BUSY) or on a table another one created.
func TestConcurrentFirstStartsMigrateSQLiteOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fresh.sqlite")
	cfg := config.DB{Connection: database.SQLite, Database: path, MaxOpenConns: 1, MaxIdleConns: 1}
	var logs testkit.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	errs := make([]error, 6)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			db, err := database.OpenMigrated(context.Background(), cfg, log)
			if err == nil {
				err = database.Close(db)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("start %d: %v", i, err)
		}
	}

	db, err := database.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer database.Close(db)
	m, err := database.NewMigrator(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckCurrent(context.Background()); err != nil {
		t.Fatalf("schema after the starts: %v", err)
	}
	status, err := m.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var recorded int64
	if err := db.Table("goose_db_version").Where("version_id > 0").Count(&recorded).Error; err != nil {
		t.Fatal(err)
	}
	if recorded != int64(len(status)) {
		t.Errorf("%d migrations recorded, want each of the %d once", recorded, len(status))
	}
	applied := 0
	for _, m := range regexp.MustCompile(`msg=migrated .*applied=(\d+)`).FindAllStringSubmatch(logs.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		applied += n
	}
	if applied != len(status) {
		t.Errorf("the starts logged %d migrations applied, want %d:\n%s", applied, len(status), logs.String())
	}
}

func TestOpenMigratedLogsTheMigration(t *testing.T) {
	cfg := config.DB{Connection: database.SQLite, Database: filepath.Join(t.TempDir(), "db.sqlite"), MaxOpenConns: 1, MaxIdleConns: 1}
	var logs testkit.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for range 2 { // the second start finds nothing to do and says nothing
		db, err := database.OpenMigrated(context.Background(), cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := database.Close(db); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob("migrations/sqlite/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`msg=migrated database="sqlite %s" applied=%d`, cfg.Database, len(files))
	if got := logs.String(); !strings.Contains(got, want) || strings.Count(got, "msg=migrated") != 1 {
		t.Errorf("log = %q, want one line with %q", got, want)
	}
}

// A MySQL schema is checked at start, never migrated: replicas must not race.
func TestOpenMigratedOnlyChecksMySQL(t *testing.T) {
	empty := testdb.Empty(t, database.MySQL)
	_, err := database.OpenMigrated(context.Background(), empty.Config, nil)
	if !errors.Is(err, database.ErrSchemaBehind) {
		t.Fatalf("OpenMigrated on an unmigrated MySQL = %v, want ErrSchemaBehind", err)
	}
	var tables int64
	if err := empty.Gorm.Raw("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
		empty.Config.Database, "consumers").Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Error("OpenMigrated migrated a MySQL database")
	}

	migrated := testdb.New(t, database.MySQL)
	db, err := database.OpenMigrated(context.Background(), migrated.Config, nil)
	if err != nil {
		t.Fatalf("OpenMigrated on a current MySQL: %v", err)
	}
	if err := database.Close(db); err != nil {
		t.Fatal(err)
	}
}

// The database file and SQLite's -wal and -shm beside it are readable by
// their owner alone, fresh or found with wider permissions.
func TestSQLiteFilesAreOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	cfg := config.DB{Connection: database.SQLite, Database: path, MaxOpenConns: 1, MaxIdleConns: 1}
	for _, stage := range []string{"fresh", "widened"} {
		db, err := database.OpenMigrated(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			info, err := os.Stat(f)
			if err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			if perm := info.Mode().Perm(); perm != 0o600 {
				t.Errorf("%s: %s has mode %o, want 600", stage, filepath.Base(f), perm)
			}
		}
		if err := database.Close(db); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path + "-wal", path + "-shm"} {
			os.Remove(f)
		}
	}
}
