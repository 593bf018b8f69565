package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/licensor-api/licensor/database"
)

func migrate(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	force := fs.Bool("force", false, "down: roll back a migration whose rollback drops a table or a column (take a backup first)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: licensor migrate [up|down [--force]|status]\n\n  up      apply every pending migration (the default)\n"+
			"  down    roll back the newest migration; one that drops a table or a column (its data with it) is refused\n"+
			"          unless --force is given: take a backup first (licensor backup; mysqldump on MySQL)\n"+
			"  status  list migrations and whether each is applied\n\nflags:")
		fs.PrintDefaults()
	}
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	action := "up"
	if fs.NArg() > 0 {
		action = fs.Arg(0)
		if ok, err := parseFlags(fs, env{args: fs.Args()[1:], stdout: e.stdout, stderr: e.stderr}); !ok { // flags after the action
			return err
		}
	}
	if fs.NArg() > 0 {
		return usagef("migrate: too many arguments")
	}
	if *force && action != "down" {
		return usagef("migrate: --force goes with down only")
	}
	if action != "up" && action != "down" && action != "status" {
		return usagef("migrate: unknown action %q (up, down or status)", action)
	}
	cfg, log, err := loadConfig(e)
	if err != nil {
		return err
	}
	if action != "up" {
		// status and down only read, or undo: they create no database.
		if err := databaseExists(cfg.DB); err != nil {
			if _, serr := os.Stat(cfg.DB.Database); action == "status" && errors.Is(serr, os.ErrNotExist) {
				return statusOfNone(e, cfg.DB.Database)
			}
			return fmt.Errorf("migrate %s: %w", action, err)
		}
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
	m, err := database.NewMigrator(db)
	if err != nil {
		return err
	}
	switch action {
	case "up":
		n, err := m.Up(ctx)
		if err != nil {
			return err
		}
		log.Info("migrated", "database", cfg.DB.Redacted(), "applied", n)
		return cfg.CreateKey() // in local: the key every later command reads
	case "down":
		newest, drops, err := m.Drops(ctx)
		if err != nil {
			return err
		}
		if len(drops) > 0 && !*force {
			return fmt.Errorf("migrate down: rolling back migration %d destroys data (%s); take a backup first "+
				"(licensor backup; mysqldump on MySQL), then run licensor migrate down --force", newest, strings.Join(drops, "; "))
		}
		v, err := m.Down(ctx)
		if err != nil {
			return err
		}
		if v == 0 { // database.Migrator.Down: no migration was applied
			log.Info("nothing to roll back", "database", cfg.DB.Redacted())
			return nil
		}
		log.Info("rolled back", "database", cfg.DB.Redacted(), "version", v)
	case "status":
		st, err := m.Status(ctx)
		if err != nil {
			return err
		}
		return writeStatus(e, st)
	}
	return nil
}

// statusOfNone is migrate status where no SQLite database is.
func statusOfNone(e env, path string) error {
	st, err := database.Migrations(database.SQLite)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "no database at %s: none is applied; `licensor migrate` creates it\n", path)
	return writeStatus(e, st)
}

func writeStatus(e env, st []database.MigrationStatus) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tMIGRATION\tAPPLIED")
	for _, s := range st {
		fmt.Fprintf(tw, "%d\t%s\t%v\n", s.Version, s.Name, s.Applied)
	}
	return tw.Flush()
}
