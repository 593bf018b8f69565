package console

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// migrate down with nothing applied (an empty database: down creates none)
// says so, instead of "rolled back".
func TestMigrateDownWithNothingToRollBack(t *testing.T) {
	t.Chdir(t.TempDir())
	path := filepath.Join(t.TempDir(), "db.sqlite")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := getenvOf(map[string]string{"DB_DATABASE": path})
	migrate := func(args ...string) string {
		t.Helper()
		var stderr bytes.Buffer
		if err := Run(context.Background(), append([]string{"migrate"}, args...), env, &bytes.Buffer{}, &stderr); err != nil {
			t.Fatalf("migrate %s: %v\n%s", args, err, stderr.String())
		}
		return stderr.String()
	}
	if log := migrate("down"); !strings.Contains(log, `msg="nothing to roll back"`) || strings.Contains(log, "rolled back") {
		t.Errorf("down on an empty database logged:\n%s\nwant \"nothing to roll back\"", log)
	}
	migrate("up")
	if log := migrate("down", "--force"); !strings.Contains(log, `msg="rolled back"`) || !strings.Contains(log, "version=") {
		t.Errorf("down after up logged:\n%s\nwant \"rolled back\" with the version", log)
	}
}

// migrate down refuses to roll back a migration that drops a table or a
// column unless --force says the operator took a backup: the error names
// the migration and what it would drop, and nothing changes. A rollback
// that destroys nothing (migration 13's) goes through without it.
func TestMigrateDownRefusesToDropDataWithoutForce(t *testing.T) {
	t.Chdir(t.TempDir())
	env := getenvOf(map[string]string{"DB_DATABASE": filepath.Join(t.TempDir(), "db.sqlite")})
	run := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), append([]string{"migrate"}, args...), env, &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	if out, err := run("up"); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	for _, m := range []struct {
		version int
		drops   string // what its rollback says it drops; "" when nothing
	}{
		{20, "DROP TABLE vendor_site_claims"}, // the vendor sites' claims
		{19, "DROP TABLE rate_limits"},        // the rate limit's windows from the first hit
		{18, "DROP TABLE vendor_kind"},        // the vendor kind
		{17, "DROP TABLE console_sessions"},   // the console's sessions
		{16, "DROP COLUMN last_claimed_at"},   // the webhook endpoints' fairness columns
		{15, "DROP TABLE activity_hours"},     // the activity counters
		{14, "DROP TABLE consumer_events"},    // the events and webhook tables
		{13, ""},                              // a repair, nothing to drop
	} {
		out, err := run("down")
		if m.drops == "" {
			if err != nil {
				t.Fatalf("migrate down of %d, a rollback that drops nothing: %v\n%s", m.version, err, out)
			}
			continue
		}
		if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), fmt.Sprintf("migration %d", m.version)) ||
			!strings.Contains(err.Error(), m.drops) {
			t.Fatalf("migrate down of %d without --force = %v (exit %d)\n%s; want it refused, naming what it drops", m.version, err, ExitCode(err), out)
		}
		if out, err := run("down", "--force"); err != nil {
			t.Fatalf("migrate down --force of %d: %v\n%s", m.version, err, out)
		}
	}
	out, err := run("down")
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "migration 12") ||
		!strings.Contains(err.Error(), "DROP TABLE audit_events") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("migrate down of 12 without --force = %v (exit %d)\n%s; want it refused, naming what it drops", err, ExitCode(err), out)
	}
	status, _ := run("status")
	if !strings.Contains(status, "12  ") || !regexpMatch(t, `(?m)^12\s+\S+\s+true$`, status) {
		t.Errorf("after the refused rollback, status:\n%s\nwant 12 still applied", status)
	}
	if out, err := run("down", "--force"); err != nil || !strings.Contains(out, "rolled back") {
		t.Fatalf("migrate down --force = %v\n%s", err, out)
	}
	if regexpMatch(t, `(?m)^12\s+\S+\s+true$`, mustRun(t, run, "status")) {
		t.Error("12 is still applied after down --force")
	}
	if _, err := run("up", "--force"); ExitCode(err) != 2 {
		t.Errorf("migrate up --force = %v, want a usage error", err)
	}
}

func regexpMatch(t *testing.T, pattern, s string) bool {
	t.Helper()
	return regexp.MustCompile(pattern).MatchString(s)
}

func mustRun(t *testing.T, run func(...string) (string, error), args ...string) string {
	t.Helper()
	out, err := run(args...)
	if err != nil {
		t.Fatalf("migrate %v: %v\n%s", args, err, out)
	}
	return out
}
