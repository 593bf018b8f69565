// Package console is licensor's command line, Laravel's app/Console: Run
// dispatches to one file per command, and bootstrap.go wires the
// application for the commands and for the tests.
package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/licensor-api/licensor/app/ratelimit"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// usageError is a mistake in the command line: main exits 2 for it.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// ExitCode is the process's exit status for Run's error: 0 for none, 2 for a
// mistake in the command line, 1 for any other failure.
func ExitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

func usagef(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// env is what every command gets: its arguments, the environment reader and
// where to write.
type env struct {
	args   []string
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e env) error
}

func commands() []command {
	return []command{
		{"serve", "run the HTTP API (the default)", serve},
		{"migrate", "apply (up), roll back one (down) or list (status) migrations", migrate},
		{"token", "issue, list or revoke API tokens; list their audit trail", tokenCmd},
		{"reconcile", "one pass settling pending intents with the vendor", reconcile},
		{"prune", "one pass deleting expired idempotency records", prune},
		{"drift", "compare the vendor's sites with the licenses; --fix applies the vendor's state (bounded; --force past DRIFT_MAX_FIX)", drift},
		{"intents", "list, show, retry or discard intents (idempotency records) in the database", intentsCmd},
		{"webhooks", "list webhook endpoints, an endpoint's deliveries, or retry a delivery", webhooksCmd},
		{"keys", "rotate: re-encrypt secrets at rest under the current APP_KEY; status: count them by key", keysCmd},
		{"vendor-sim", "serve a simulated license vendor with fault knobs", vendorSim},
		{"licenses", "create or list licenses through a running API (LICENSOR_URL, LICENSOR_TOKEN)", func(ctx context.Context, e env) error { return licensesCmd(ctx, e) }},
		{"backup", "a consistent copy of the SQLite database while serve runs (MySQL: mysqldump)", backup},
		{"healthcheck", "exit 0 when /readyz (or a URL) answers 2xx: the container's health check", healthcheck},
		{"version", "print the version, the commit and the Go version of this build", versionCmd},
		{"help", "print this list; `licensor help <command>` prints a command's flags", nil},
	}
}

// Run is the whole program: main only adds the process's signals, arguments,
// environment and streams, so tests can run it with their own.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name, rest := "serve", args // no command, or flags only: serve's
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			return help(ctx, args[1:], getenv, stdout, stderr)
		case "-v", "-version", "--version":
			name, rest = "version", args[1:]
		default:
			if !strings.HasPrefix(args[0], "-") {
				name, rest = args[0], args[1:]
			}
		}
	}
	for _, c := range commands() {
		if c.name == name && c.run != nil {
			return c.run(ctx, env{args: rest, getenv: getenv, stdout: stdout, stderr: stderr})
		}
	}
	printUsage(stderr)
	return usagef("unknown command %q", name)
}

// help prints the list of commands on stdout; `help <command>` is
// `<command> --help`.
func help(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		printUsage(stdout)
		return nil
	case len(args) > 1 || args[0] == "help" || strings.HasPrefix(args[0], "-"):
		return usagef("help: give at most one command, e.g. `licensor help token`")
	}
	return Run(ctx, []string{args[0], "--help"}, getenv, stdout, stderr)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: licensor <command> [flags]\n\ncommands:")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\n`licensor <command> --help` prints a command's flags.")
}

// setUsage gives a command's --help the house style: the usage line (after
// "licensor "), a one-line summary, then the flags if it has any.
func setUsage(fs *flag.FlagSet, line, summary string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: licensor %s\n\n%s\n", line, summary)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
}

// subcommand is one line of a command's list of subcommands.
type subcommand struct {
	name, summary string
	run           func(context.Context, env) error
}

// runSubcommand dispatches a command made of subcommands (token, licenses,
// intents): with none named, or --help, it prints them in the house style
// (the usage line, a one-line summary, the subcommands); an unknown one is a
// usage error naming those it knows.
func runSubcommand(ctx context.Context, e env, group, summary string, subs []subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	known := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(e.args) == 0 || strings.HasPrefix(e.args[0], "-") {
		line := group + " " + strings.Join(names, "|") + " [flags]"
		if len(e.args) > 0 && (e.args[0] == "-h" || e.args[0] == "-help" || e.args[0] == "--help") {
			printSubcommands(e.stdout, line, summary, subs)
			return nil
		}
		printSubcommands(e.stderr, line, summary, subs)
		return usagef("%s: name a subcommand: %s", group, known)
	}
	name := e.args[0]
	e.args = e.args[1:]
	for _, s := range subs {
		if s.name == name {
			return s.run(ctx, e)
		}
	}
	return usagef("%s: unknown subcommand %q (%s)", group, name, known)
}

// printSubcommands is the --help of a command made of subcommands, in the
// house style: the usage line, a one-line summary, then the subcommands.
func printSubcommands(w io.Writer, line, summary string, subs []subcommand) {
	fmt.Fprintf(w, "usage: licensor %s\n\n%s\n\nsubcommands:\n", line, summary)
	for _, s := range subs {
		fmt.Fprintf(w, "  %-8s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(w, "\n`licensor %s <subcommand> --help` prints a subcommand's flags.\n", strings.Fields(line)[0])
}

// parseFlags parses a command's flags. --help prints the command's usage on
// stdout and is no error (exit 0). A bad flag prints the usage on stderr and
// returns the flag package's complaint as a usage error, which main prints
// once (the flag package's own copy of it is discarded).
func parseFlags(fs *flag.FlagSet, e env) (bool, error) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(e.args)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(e.stdout)
		fs.Usage()
		return false, nil
	}
	fs.SetOutput(e.stderr)
	fs.Usage()
	return false, usagef("%s: %v", fs.Name(), err)
}

// loadConfig loads the configuration (creating nothing: see config.Read)
// and the logger that goes with it, which the MySQL driver's and go-redis's
// own lines go to as well (database.LogDriverTo, ratelimit.LogRedisTo), so
// that with LOG_FORMAT=json every line on stderr is JSON.
func loadConfig(e env) (config.Config, *slog.Logger, error) {
	cfg, err := config.Read(e.getenv)
	if err != nil {
		return config.Config{}, nil, err
	}
	log := NewLogger(cfg, e.stderr)
	database.LogDriverTo(log)
	ratelimit.LogRedisTo(log)
	return cfg, log, nil
}

// loadBase loads the configuration, then opens the Base (OpenBase): what a
// command needs that touches the database but not the vendor. The database
// must exist already (databaseExists).
func loadBase(ctx context.Context, e env) (*Base, error) {
	cfg, log, err := loadConfig(e)
	if err != nil {
		return nil, err
	}
	if err := databaseExists(cfg.DB); err != nil {
		return nil, err
	}
	return OpenBase(ctx, cfg, log, Overrides{})
}

// loadApp loads the configuration, then builds the whole application
// (Bootstrap) on a database that exists already (databaseExists: only serve
// and migrate may create one), and binds its vendor driver to the database
// (bindVendor; vendorChange is --vendor-change).
func loadApp(ctx context.Context, e env, vendorChange bool) (*App, error) {
	cfg, log, err := loadConfig(e)
	if err != nil {
		return nil, err
	}
	if err := databaseExists(cfg.DB); err != nil {
		return nil, err
	}
	a, err := Bootstrap(ctx, cfg, log, Overrides{})
	if err != nil {
		return nil, err
	}
	if err := a.bindVendor(ctx, vendorChange); err != nil {
		return nil, err
	}
	return a, nil
}

// databaseExists refuses a SQLite DB_DATABASE that names no file, so that a
// mistyped name does not silently create (and migrate) a new, empty
// database for a command that only reads or changes one (`token list`
// would list no token, `token issue` would issue one nobody serves).
func databaseExists(cfg config.DB) error {
	if cfg.Connection != database.SQLite || cfg.Database == "" || cfg.Database == ":memory:" || strings.HasPrefix(cfg.Database, "file:") {
		return nil
	}
	info, err := os.Stat(cfg.Database)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("DB_DATABASE: there is no SQLite database at %s: check DB_DATABASE (and APP_STORAGE), "+
			"or create it with `licensor migrate` (or by starting `licensor serve`)", cfg.Database)
	case err != nil:
		return fmt.Errorf("DB_DATABASE: %w", err)
	case info.IsDir():
		return fmt.Errorf("DB_DATABASE: %s is a directory, not a SQLite database", cfg.Database)
	}
	return nil
}

// unknownMySQLDatabase names DB_DATABASE (or DB_URL) in the error of a MySQL
// server that does not know the database. Only package database may import
// the driver, so its error is recognised by the server's error number as
// the driver writes it ("Error 1049 (42000): Unknown database 'x'").
func unknownMySQLDatabase(cfg config.DB, err error) error {
	if err == nil || cfg.Connection != database.MySQL || !strings.Contains(err.Error(), "Error 1049 ") {
		return err
	}
	name := "DB_DATABASE " + strconv.Quote(cfg.Database)
	if cfg.URL != "" {
		name = "the database of DB_URL"
	}
	return fmt.Errorf("%s does not exist on the MySQL server: check the name, or create it "+
		"(CREATE DATABASE ... CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci) and run `licensor migrate`: %w", name, err)
}
