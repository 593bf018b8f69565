package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/licensor-api/licensor/database"
)

// backup is `licensor backup FILE`: a consistent copy of the SQLite database,
// taken while serve runs. MySQL is refused with what to use instead.
func backup(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: licensor backup FILE

Writes a consistent copy of the SQLite database (DB_DATABASE, by default
APP_STORAGE/database.sqlite) to FILE, mode 0600, while serve goes on
running. FILE must not exist. Restore by stopping serve and putting FILE in
place of the database (its -wal and -shm files removed). Never copy a live
WAL database with cp: recent commits live in its -wal file.

On MySQL/MariaDB use mysqldump --single-transaction instead.`)
	}
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("backup: name the one file to write, e.g. licensor backup /data/backup-$(date +%%Y%%m%%d-%%H%%M%%S).sqlite")
	}
	path := fs.Arg(0)
	cfg, log, err := loadConfig(e)
	if err != nil {
		return err
	}
	if cfg.DB.Connection == database.MySQL {
		return database.ErrBackupMySQL
	}
	// database.Open would make an empty database where none is: a backup of
	// nothing is a mistake in DB_DATABASE or APP_STORAGE, said as such.
	if _, err := os.Stat(cfg.DB.Database); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: there is no SQLite database at %s (check DB_DATABASE and APP_STORAGE)", cfg.DB.Database)
	} else if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	db, err := database.Open(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer func() {
		if err := database.Close(db); err != nil {
			log.Error("close database", "error", err)
		}
	}()
	start := time.Now()
	if err := database.BackupSQLite(ctx, db, path); err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	log.Info("backed up", "database", cfg.DB.Redacted(), "file", path, "bytes", info.Size(),
		"took", time.Since(start).Round(time.Millisecond).String())
	fmt.Fprintf(e.stdout, "%s: %d bytes\n", path, info.Size())
	return nil
}
