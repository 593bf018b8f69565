package console

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// migrateHere runs `licensor migrate` with getenv in the working directory:
// the commands other than serve and migrate need a database that exists.
func migrateHere(t *testing.T, getenv func(string) string) {
	t.Helper()
	if err := Run(context.Background(), []string{"migrate"}, getenv, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// A mistyped DB_DATABASE must not create a new, empty SQLite database: every
// command but serve and migrate refuses, naming DB_DATABASE and
// `licensor migrate`, and leaves no file behind; migrate creates it, and
// then they run.
func TestCommandsRefuseMissingSQLiteDatabase(t *testing.T) {
	t.Chdir(t.TempDir())
	vars := map[string]string{"DB_DATABASE": "typo.sqlite"}
	for _, args := range [][]string{{"token", "list"}, {"token", "issue", "--consumer", "acme", "--abilities", "licenses:read"},
		{"intents", "list"}, {"prune"}, {"reconcile"}, {"keys", "status"}} {
		err := Run(context.Background(), args, getenvOf(vars), &bytes.Buffer{}, &bytes.Buffer{})
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "DB_DATABASE") || !strings.Contains(err.Error(), "typo.sqlite") ||
			!strings.Contains(err.Error(), "licensor migrate") {
			t.Errorf("%q on a missing database = %v, want exit 1 naming DB_DATABASE, the file and `licensor migrate`", args, err)
		}
		if _, err := os.Stat("typo.sqlite"); !os.IsNotExist(err) {
			t.Fatalf("%q created the database it was refused: %v", args, err)
		}
	}
	migrateHere(t, getenvOf(vars))
	var stdout bytes.Buffer
	if err := Run(context.Background(), []string{"token", "list"}, getenvOf(vars), &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("token list after migrate: %v", err)
	}
}

// On MySQL an unknown database already fails; the message names the
// variable that chose it (DB_URL here; DB_DATABASE below).
func TestUnknownMySQLDatabaseNamesVariable(t *testing.T) {
	db := testdb.Empty(t, database.MySQL) // skips without TEST_MYSQL_DSN
	t.Chdir(t.TempDir())
	url := strings.Replace(db.Config.URL, "/"+db.Config.Database, "/licensor_no_such_database", 1)
	if url == db.Config.URL {
		t.Fatalf("cannot find the database's name in %q", db.Config.URL)
	}
	vars := map[string]string{"DB_CONNECTION": "mysql", "DB_URL": url}
	for _, args := range [][]string{{"token", "list"}, {"serve"}} {
		err := Run(context.Background(), args, getenvOf(vars), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "DB_URL") || !strings.Contains(err.Error(), "licensor migrate") {
			t.Errorf("%q on an unknown MySQL database = %v, want DB_URL named", args, err)
		}
	}
}

func TestUnknownMySQLDatabaseMessage(t *testing.T) {
	driverErr := errors.New("open mysql: Error 1049 (42000): Unknown database 'licensr'")
	cfg := config.DB{Connection: database.MySQL, Database: "licensr"}
	if err := unknownMySQLDatabase(cfg, driverErr); !strings.Contains(err.Error(), `DB_DATABASE "licensr" does not exist`) || !errors.Is(err, driverErr) {
		t.Errorf("got %v, want DB_DATABASE named, wrapping the driver's error", err)
	}
	other := errors.New("open mysql: Error 1045 (28000): Access denied")
	if err := unknownMySQLDatabase(cfg, other); err != other {
		t.Errorf("another error became %v", err)
	}
}
