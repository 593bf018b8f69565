package database

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/wait"
)

// migrationLockSuffix names the file beside an SQLite database that
// migrations lock: path + suffix. It stays there empty between starts.
const migrationLockSuffix = "-migrate.lock"

// lockSQLiteMigrations holds off every other process (and every other
// OpenMigrated of this one) migrating the SQLite file db is open on, until
// the returned unlock is called. Without it two starts can both see a
// migration pending and both run it: one that fails on a table the other
// made is harmless, but one that only changes rows (an UPDATE, an index IF
// NOT EXISTS) would run twice and be recorded twice. The lock is the
// operating system's on a file beside the database, so a process that dies
// holding it lets go of it at once. An in-memory database needs none.
func lockSQLiteMigrations(ctx context.Context, db *gorm.DB) (unlock func() error, err error) {
	path, err := sqliteFile(ctx, db)
	if err != nil || path == "" {
		return func() error { return nil }, err
	}
	f, err := os.OpenFile(path+migrationLockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the migration lock: %w", err)
	}
	for {
		held, err := tryLockFile(f)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("take the migration lock: %w", err), f.Close())
		}
		if held {
			return func() error { return errors.Join(unlockFile(f), f.Close()) }, nil
		}
		if err := wait.Sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, errors.Join(fmt.Errorf("wait for the migration lock %s: %w", path+migrationLockSuffix, err), f.Close())
		}
	}
}

// sqliteFile is the file of db's main database; "" when it lives in memory.
func sqliteFile(ctx context.Context, db *gorm.DB) (string, error) {
	var files []struct {
		Seq  int
		Name string
		File string
	}
	if err := db.WithContext(ctx).Raw("PRAGMA database_list").Scan(&files).Error; err != nil {
		return "", fmt.Errorf("find the database file: %w", err)
	}
	for _, f := range files {
		if f.Name == "main" {
			return f.File, nil
		}
	}
	return "", nil
}
