package console

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

func getenvOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// testKey is the APP_KEY of the commands the tests run on a test database.
const testKey = "base64:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// dbEnv is vars, with the variables that point a command at db added.
func dbEnv(db *testdb.DB, vars map[string]string) func(string) string {
	if db.Dialect == database.MySQL {
		vars["DB_CONNECTION"], vars["DB_URL"] = "mysql", db.Config.URL
	} else {
		vars["DB_DATABASE"] = db.Config.Database
	}
	return getenvOf(vars)
}

// A mistake in the command line exits 2, before anything is opened.
func TestUsageErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"frobnicate"}, {"serve", "--bogus"}, {"migrate", "sideways"}, {"migrate", "up", "extra"}, {"version", "extra"},
		{"help", "frob"}, {"help", "token", "issue"}, {"help", "--bogus"},
		{"token"}, {"token", "mint"}, {"token", "issue", "--consumer", "acme"}, {"token", "revoke"},
		{"token", "issue", "--consumer", "acme", "--abilities", "licenses:read,licenses:wirte"},
		{"intents"}, {"intents", "frob"}, {"intents", "list", "--status", "done"}, {"intents", "list", "--older-than", "-5m"},
		{"intents", "list", "--older-than", "soon"}, {"intents", "list", "--page", "0"}, {"intents", "list", "--per-page", "0"},
		{"intents", "list", "--per-page", "101"}, {"intents", "list", "extra"}, {"intents", "list", "--bogus"},
		{"intents", "show"}, {"intents", "show", "a", "b"}, {"intents", "retry"}, {"intents", "retry", "a", "b"}, {"intents", "retry", "--json", "a"},
		{"keys"}, {"keys", "spin"}, {"keys", "rotate", "extra"}, {"keys", "rotate", "--batch", "0"},
		{"keys", "status", "extra"}, {"keys", "status", "--batch", "0"}, {"keys", "status", "--jsn"},
		{"vendor-sim", "--bogus"}, {"vendor-sim", "extra"}, {"vendor-sim", "--drop-mode", "sideways"}, {"vendor-sim", "--5xx-rate", "2"},
		{"vendor-sim", "--429-burst", "-1"}, {"vendor-sim", "--429-rate", "1.1"}, {"vendor-sim", "--drop-rate", "-0.5"},
		{"vendor-sim", "--drop-mode", "5xx"}, {"vendor-sim", "--fault-phase", "during"}, {"vendor-sim", "--jitter", "-1s"},
		{"vendor-sim", "--seed", "soon"},
		{"vendor-sim", "--webhook-url", "http://127.0.0.1:1/hook"}, // no secret to sign with
		{"vendor-sim", "--webhook-url", "ftp://127.0.0.1/hook", "--webhook-secret", "s"},
		{"vendor-sim", "--webhook-url", "http://127.0.0.1:1/hook", "--webhook-secret", "s", "--webhook-dup-rate", "2"},
		{"vendor-sim", "--webhook-shuffle=maybe"},
	} {
		if err := Run(context.Background(), args, getenvOf(nil), &bytes.Buffer{}, &bytes.Buffer{}); ExitCode(err) != 2 {
			t.Errorf("%q = %v, want a usage error (exit 2)", args, err)
		}
	}
	err := Run(context.Background(), []string{"token", "issue", "--consumer", "a", "--abilities", "licenses:wirte"}, getenvOf(nil), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `"licenses:wirte"`) {
		t.Errorf("err = %v, want the unknown ability named", err)
	}
	if _, err := os.Stat("storage"); !os.IsNotExist(err) {
		t.Error("a usage error opened the database first")
	}
}

func TestBadConfigStopsStartWithVariableNamed(t *testing.T) {
	t.Chdir(t.TempDir())
	err := Run(context.Background(), nil, getenvOf(map[string]string{"IDEMPOTENCY_LOCK_TIMEOUT": "soon"}), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "IDEMPOTENCY_LOCK_TIMEOUT") {
		t.Fatalf("err = %v, want the variable named", err)
	}
}

// Production refuses the in-memory fake vendor, the default driver: every
// command exits 1 naming VENDOR_DRIVER and VENDOR_ALLOW_FAKE, before
// anything is opened; VENDOR_ALLOW_FAKE=true serves, with the fake's warning.
func TestProductionRefusesFakeVendor(t *testing.T) {
	t.Chdir(t.TempDir())
	addr := testkit.FreeAddr(t)
	vars := map[string]string{"APP_ENV": "production", "APP_ADDR": addr, "APP_URL": "http://" + addr, "APP_KEY": testKey}
	// Cancelled: were the refusal missing, serve would stop at once instead
	// of holding the test up.
	stopped, stop := context.WithCancel(context.Background())
	stop()
	for _, args := range [][]string{nil, {"serve"}, {"reconcile"}, {"token", "list"}} {
		err := Run(stopped, args, getenvOf(vars), &bytes.Buffer{}, &bytes.Buffer{})
		if ExitCode(err) != 1 || !strings.Contains(err.Error(), "VENDOR_DRIVER") || !strings.Contains(err.Error(), "VENDOR_ALLOW_FAKE") {
			t.Errorf("%q in production with the fake = %v, want exit 1 naming VENDOR_DRIVER and VENDOR_ALLOW_FAKE", args, err)
		}
	}
	if _, err := os.Stat("storage"); !os.IsNotExist(err) {
		t.Error("the refusal came after storage/ was made")
	}

	vars["VENDOR_ALLOW_FAKE"] = "true"
	stderr := &testkit.Buffer{}
	if err := startServe(t, addr, getenvOf(vars), stderr)(); err != nil {
		t.Fatalf("serve with VENDOR_ALLOW_FAKE=true: %v", err)
	}
	if log := stderr.String(); !strings.Contains(log, "in-memory fake") || !strings.Contains(log, `"vendor_driver":"fake"`) {
		t.Errorf("log lacks the fake's warning:\n%s", log)
	}
}

// TestServeWithNoConfiguration is `go run .` on a fresh machine: no .env,
// no database server; it migrates SQLite, serves /healthz, and stops cleanly.
func TestServeWithNoConfiguration(t *testing.T) {
	t.Chdir(t.TempDir())
	addr := testkit.FreeAddr(t)
	stderr := &testkit.Buffer{}
	if err := startServe(t, addr, getenvOf(map[string]string{"APP_ADDR": addr}), stderr)(); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	log := stderr.String()
	for _, want := range []string{"addr=http://" + addr, "database=\"sqlite storage/database.sqlite\"", "vendor_driver=fake", "stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestServeRefusesMySQLSchemaBehind(t *testing.T) {
	db := testdb.Empty(t, database.MySQL)
	files, err := filepath.Glob("../../database/migrations/mysql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	env := getenvOf(map[string]string{"DB_CONNECTION": "mysql", "DB_URL": db.Config.URL, "APP_ADDR": testkit.FreeAddr(t)})
	err = Run(context.Background(), nil, env, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, database.ErrSchemaBehind) || !strings.Contains(err.Error(), "licensor migrate") {
		t.Fatalf("serve on an unmigrated MySQL = %v, want ErrSchemaBehind asking for migrate", err)
	}
	var stdout bytes.Buffer
	if err := Run(context.Background(), []string{"migrate"}, env, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := Run(context.Background(), []string{"migrate", "status"}, env, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("migrate status: %v", err)
	}
	if got := strings.Count(stdout.String(), "true"); got != len(files) || got == 0 {
		t.Errorf("status shows %d applied migrations, want all %d:\n%s", got, len(files), stdout.String())
	}
}

// startServe runs serve (Run without arguments) on env, its log going to
// stderr, and waits until /healthz on addr answers 200. stop cancels
// serve's context and returns what serve returned; a serve that does not
// stop within 10 seconds fails the test.
func startServe(t *testing.T, addr string, env func(string) string, stderr io.Writer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, env, &bytes.Buffer{}, stderr) }()
	waitHealthy(t, "http://"+addr, done)
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("serve did not stop after its context was cancelled")
			return nil
		}
	}
}

// waitHealthy polls /healthz until it answers 200, the server fails, or a
// deadline passes.
func waitHealthy(t *testing.T, base string, done <-chan error) {
	t.Helper()
	healthy := func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v", err)
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !testkit.Poll(15*time.Second, healthy) {
		t.Fatalf("%s/healthz did not answer within the deadline", base)
	}
}

// TestTokenCommandsAgainstServe issues a token with the CLI and uses it
// against serve, on both databases; then list and revoke through the CLI.
func TestTokenCommandsAgainstServe(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Chdir(t.TempDir())
		addr := testkit.FreeAddr(t)
		env := dbEnv(db, map[string]string{"APP_ADDR": addr, "APP_KEY": testKey})
		ctx := context.Background()

		var stdout, stderr bytes.Buffer
		if err := Run(ctx, []string{"token", "issue", "--consumer", "acme", "--abilities", "tokens:manage,licenses:write"}, env, &stdout, &stderr); err != nil {
			t.Fatalf("token issue: %v\n%s", err, stderr.String())
		}
		token := strings.TrimSpace(stdout.String())
		if strings.Count(token, ".") != 2 || strings.Contains(token, "\n") {
			t.Fatalf("stdout is not the token alone: %q", stdout.String())
		}

		defer startServe(t, addr, env, &testkit.Buffer{})()

		if got := getStatus(t, "http://"+addr+"/api/tokens", token); got != http.StatusOK {
			t.Fatalf("CLI token against serve: status %d, want 200", got)
		}

		stdout.Reset()
		if err := Run(ctx, []string{"token", "list", "--consumer", "acme"}, env, &stdout, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if len(lines) != 2 || strings.Contains(stdout.String(), token) {
			t.Fatalf("token list = %q, want a header and one row, no secret", stdout.String())
		}
		id := strings.Fields(lines[1])[0]
		if err := Run(ctx, []string{"token", "revoke", id}, env, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		if got := getStatus(t, "http://"+addr+"/api/tokens", token); got != http.StatusUnauthorized {
			t.Fatalf("revoked token: status %d, want 401", got)
		}
		if err := Run(ctx, []string{"token", "revoke", "01NOSUCHTOKEN0000000000000"}, env, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Error("revoking an unknown token succeeded")
		}
	})
}

func getStatus(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Every command's and subcommand's --help goes to stdout and exits 0, with
// nothing on stderr: `licensor token issue --help | less` shows it.
func TestHelpGoesToStdout(t *testing.T) {
	t.Chdir(t.TempDir())
	var cases [][]string
	for _, c := range commands() {
		if c.run != nil {
			cases = append(cases, []string{c.name, "--help"}, []string{c.name, "-h"})
		}
	}
	for _, sub := range []string{"token issue", "token list", "token revoke", "token events",
		"intents list", "intents show", "intents retry", "intents discard", "intents events", "intents digest",
		"keys rotate", "keys status", "licenses create", "licenses list"} {
		cases = append(cases, append(strings.Fields(sub), "--help"))
	}
	cases = append(cases, []string{"help", "token"}, []string{"--help"}, []string{"intents", "retry", "-h"})
	for _, args := range cases {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), args, getenvOf(nil), &stdout, &stderr)
		if err != nil || !strings.Contains(stdout.String(), "usage: licensor") || stderr.Len() > 0 {
			t.Errorf("%q = %v (exit %d), stdout %q, stderr %q; want the usage on stdout, exit 0", args, err, ExitCode(err), stdout.String(), stderr.String())
		}
	}
	if _, err := os.Stat("storage"); !os.IsNotExist(err) {
		t.Error("a --help made storage/")
	}
}

// A bad flag is reported once: main prints the returned error, so the flag
// package's own copy must not reach stderr; the usage still goes there.
func TestFlagErrorPrintedOnce(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"serve", "--bogus"}, {"--bogus"}, {"token", "issue", "--ttl", "soon"}, {"licenses", "list", "--nope"}} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), args, getenvOf(nil), &stdout, &stderr)
		if ExitCode(err) != 2 {
			t.Errorf("%q = %v, want exit 2", args, err)
			continue
		}
		// What the user sees: stderr, then main's "licensor: <err>".
		seen := stderr.String() + "licensor: " + err.Error() + "\n"
		for _, complaint := range []string{"flag provided but not defined", "invalid value"} {
			if n := strings.Count(seen, complaint); n > 1 {
				t.Errorf("%q: %q printed %d times:\n%s", args, complaint, n, seen)
			}
		}
		if !strings.Contains(stderr.String(), "usage: licensor") || stdout.Len() > 0 {
			t.Errorf("%q: want the usage on stderr and nothing on stdout; stdout %q, stderr %q", args, stdout.String(), stderr.String())
		}
	}
}
