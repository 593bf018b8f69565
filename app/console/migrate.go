package console

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/licensor-api/licensor/database"
)

// migrate applies, rolls back or lists the embedded migrations.
func migrate(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: licensor migrate [up|down|status]\n\n  up      apply every pending migration (the default)\n  down    roll back the newest migration\n  status  list migrations and whether each is applied")
	}
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	action := "up"
	switch fs.NArg() {
	case 0:
	case 1:
		action = fs.Arg(0)
	default:
		return usagef("migrate: too many arguments")
	}
	if action != "up" && action != "down" && action != "status" {
		return usagef("migrate: unknown action %q (up, down or status)", action)
	}
	cfg, log, err := loadConfig(e)
	if err != nil {
		return err
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
	case "down":
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
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tMIGRATION\tAPPLIED")
		for _, s := range st {
			fmt.Fprintf(tw, "%d\t%s\t%v\n", s.Version, s.Name, s.Applied)
		}
		return tw.Flush()
	}
	return nil
}
