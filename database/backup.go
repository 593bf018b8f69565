package database

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gorm.io/gorm"
)

// ErrBackupMySQL is BackupSQLite's answer for a MySQL connection: a MySQL
// database is backed up with the server's own tools, not by licensor.
var ErrBackupMySQL = errors.New("backup: the database is MySQL/MariaDB: licensor backup copies an embedded SQLite database only; " +
	"use mysqldump --single-transaction (or mariadb-dump --single-transaction), a replica, or xtrabackup/mariabackup")

// BackupSQLite writes a consistent copy of the SQLite database db to path,
// online, with VACUUM INTO: one read transaction while others go on writing.
// A bare copy of the file could miss commits still in the -wal file, or tear.
//
// The copy is 0600, like the database. An existing path is refused, and the
// copy appears at path only once whole and synced (written beside it, then
// linked). A MySQL connection gets ErrBackupMySQL. Only ctx bounds the copy,
// not DB_QUERY_TIMEOUT: a large database takes longer than that.
func BackupSQLite(ctx context.Context, db *gorm.DB, path string) error {
	if name := db.Dialector.Name(); name != SQLite {
		if name == MySQL {
			return ErrBackupMySQL
		}
		return fmt.Errorf("backup: the database is %s, not SQLite", name)
	}
	if path == "" {
		return errors.New("backup: no file named")
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("backup: %s already exists; name a new file (a backup never overwrites one)", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	dir := filepath.Dir(path)
	// VACUUM INTO accepts an empty file: made here, it is 0600 from the start.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // once linked, path keeps the copy
	if err := errors.Join(tmp.Chmod(0o600), tmp.Close()); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "VACUUM INTO ?", tmpName); err != nil {
		return fmt.Errorf("backup: VACUUM INTO %s: %w", path, err)
	}
	if err := syncFile(tmpName); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := os.Link(tmpName, path); errors.Is(err, os.ErrExist) {
		return fmt.Errorf("backup: %s appeared meanwhile; it was left alone", path)
	} else if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(dir); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// syncFile flushes a file, or a directory's entries, to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
