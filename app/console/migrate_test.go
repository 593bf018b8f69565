package console

import (
	"bytes"
	"context"
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
	out, err := run("down") // 19: the rate limit's windows from the first hit
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "migration 19") ||
		!strings.Contains(err.Error(), "DROP TABLE rate_limits") {
		t.Fatalf("migrate down of 19 without --force = %v (exit %d)\n%s; want it refused, naming what it drops", err, ExitCode(err), out)
	}
	if out, err := run("down", "--force"); err != nil {
		t.Fatalf("migrate down --force of 19: %v\n%s", err, out)
	}
	out, err = run("down") // 18: the vendor kind
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "migration 18") ||
		!strings.Contains(err.Error(), "DROP TABLE vendor_kind") {
		t.Fatalf("migrate down of 18 without --force = %v (exit %d)\n%s; want it refused, naming what it drops", err, ExitCode(err), out)
	}
	if out, err := run("down", "--force"); err != nil {
		t.Fatalf("migrate down --force of 18: %v\n%s", err, out)
	}
	out, err = run("down") // 17: the console's sessions
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "migration 17") ||
		!strings.Contains(err.Error(), "DROP TABLE console_sessions") {
		t.Fatalf("migrate down of 17 without --force = %v (exit %d)\n%s; want it refused, naming what it drops", err, ExitCode(err), out)
	}
	if out, err := run("down", "--force"); err != nil {
		t.Fatalf("migrate down --force of 17: %v\n%s", err, out)
	}
	out, err = run("down") // 16: the webhook endpoints' fairness columns
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "migration 16") ||
		!strings.Contains(err.Error(), "DROP COLUMN last_claimed_at") {
		t.Fatalf("migrate down of 16 without --force = %v (exit %d)\n%s; want it refused, naming what it drops", err, ExitCode(err), out)
	}
	if out, err := run("down", "--force"); err != nil {
		t.Fatalf("migrate down --force of 16: %v\n%s", err, out)
	}
	out, err = run("down") // 15: the activity counters
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "migration 15") ||
		!strings.Contains(err.Error(), "DROP TABLE activity_hours") {
		t.Fatalf("migrate down of 15 without --force = %v (exit %d)\n%s; want it refused, naming what it drops", err, ExitCode(err), out)
	}
	if out, err := run("down", "--force"); err != nil {
		t.Fatalf("migrate down --force of 15: %v\n%s", err, out)
	}
	out, err = run("down") // 14: the events and webhook tables
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "migration 14") ||
		!strings.Contains(err.Error(), "DROP TABLE consumer_events") {
		t.Fatalf("migrate down of 14 without --force = %v (exit %d)\n%s; want it refused, naming what it drops", err, ExitCode(err), out)
	}
	if out, err := run("down", "--force"); err != nil {
		t.Fatalf("migrate down --force of 14: %v\n%s", err, out)
	}
	if out, err := run("down"); err != nil { // 13: a repair, nothing to drop
		t.Fatalf("migrate down of a rollback that drops nothing: %v\n%s", err, out)
	}
	out, err = run("down")
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
