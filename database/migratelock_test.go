//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package database_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// A start that finds another process migrating the file (holding the lock
// beside it) waits for it rather than running the same migrations at once,
// and migrates once the lock is let go of.
func TestSQLiteStartWaitsForTheMigrationLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fresh.sqlite")
	cfg := config.DB{Connection: database.SQLite, Database: path, MaxOpenConns: 1, MaxIdleConns: 1}
	lock, err := os.OpenFile(path+"-migrate.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if db, err := database.OpenMigrated(ctx, cfg, nil); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			database.Close(db)
		}
		t.Fatalf("start while another holds the migration lock: %v, want it to wait until its context ends", err)
	}
	db, err := database.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var tables int64
	if err := db.Raw("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'licenses'").Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	database.Close(db)
	if tables != 0 {
		t.Fatal("the waiting start migrated anyway")
	}

	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	db, err = database.OpenMigrated(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("start once the lock is free: %v", err)
	}
	database.Close(db)
}
