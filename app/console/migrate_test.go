package console

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// migrate down with nothing applied says so, instead of "rolled back".
func TestMigrateDownWithNothingToRollBack(t *testing.T) {
	t.Chdir(t.TempDir())
	env := getenvOf(map[string]string{"DB_DATABASE": filepath.Join(t.TempDir(), "db.sqlite")})
	migrate := func(action string) string {
		t.Helper()
		var stderr bytes.Buffer
		if err := Run(context.Background(), []string{"migrate", action}, env, &bytes.Buffer{}, &stderr); err != nil {
			t.Fatalf("migrate %s: %v\n%s", action, err, stderr.String())
		}
		return stderr.String()
	}
	if log := migrate("down"); !strings.Contains(log, `msg="nothing to roll back"`) || strings.Contains(log, "rolled back") {
		t.Errorf("down on an empty database logged:\n%s\nwant \"nothing to roll back\"", log)
	}
	migrate("up")
	if log := migrate("down"); !strings.Contains(log, `msg="rolled back"`) || !strings.Contains(log, "version=") {
		t.Errorf("down after up logged:\n%s\nwant \"rolled back\" with the version", log)
	}
}
