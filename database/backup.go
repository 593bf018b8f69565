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
// online: it is SQLite's VACUUM INTO, one read transaction, so the copy is
// the database as one instant saw it, committed writes only, while other
// connections and processes (serve) go on writing. A bare copy of the file
// is not that: a WAL database keeps recent commits in its -wal file, and a
// copy taken mid-write can be torn.
//
// The copy is made readable by its owner alone (0600), like the database,
// since it holds every consumer's data. An existing path is refused, never
// overwritten, and the copy appears at path only once it is whole and on
// disk: it is written to a temporary file beside path, synced, then linked
// into place. db must be SQLite; a MySQL connection gets ErrBackupMySQL.
//
// The copy runs outside DB_QUERY_TIMEOUT, which bounds a request's
// statements: a large database takes longer than that to copy. ctx bounds it.
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
