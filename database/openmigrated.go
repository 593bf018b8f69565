package database

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/wait"
)

// OpenMigrated opens the database for a process that serves from it. An
// embedded SQLite file is migrated in place and logged on log (nil logs
// nothing). A MySQL schema is only checked, since replicas must never race to
// migrate it: one that lacks a migration is ErrSchemaBehind, for `licensor
// migrate` to apply. On a Galera node the check first waits for the node to
// catch up with the cluster.
func OpenMigrated(ctx context.Context, cfg config.DB, log *slog.Logger) (*gorm.DB, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m, err := NewMigrator(db)
	if err == nil {
		if cfg.Connection == SQLite {
			var n int
			if n, err = migrateSQLite(ctx, m); n > 0 {
				log.Info("migrated", "database", cfg.Redacted(), "applied", n)
			}
		} else if err = catchUpWithCluster(ctx, db, queryTimeout(cfg)); err == nil {
			err = m.CheckCurrent(ctx)
		}
	}
	if err != nil {
		return nil, errors.Join(err, Close(db))
	}
	return db, nil
}

const sqliteMigrateAttempts = 5

// migrateSQLite applies the migrations to an embedded database. Several
// processes started at once on a file with migrations pending (serve and a
// token command, say) take turns on the migration lock (see Migrator.Up),
// so each migration runs once and the later ones find nothing left to do.
// Should a migration still fail (a table made by an older binary, which
// took no lock), it waits and looks again rather than giving up, unless ctx
// ends first.
func migrateSQLite(ctx context.Context, m *Migrator) (int, error) {
	var err error
	applied := 0 // by this process, even in an attempt that then failed
	for attempt := 1; attempt <= sqliteMigrateAttempts; attempt++ {
		var n int
		n, err = m.Up(ctx)
		applied += n
		if err == nil {
			return applied, nil
		}
		if m.CheckCurrent(ctx) == nil {
			return applied, nil // another process finished the job
		}
		if attempt < sqliteMigrateAttempts && wait.Sleep(ctx, time.Duration(attempt)*100*time.Millisecond) != nil {
			return applied, ctx.Err()
		}
	}
	return applied, err
}
