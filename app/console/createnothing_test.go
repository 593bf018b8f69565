package console

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
)

// In an empty folder, every command but serve and migrate (up) creates
// nothing: no storage/, no app.key, no database. migrate status says none
// is applied, migrate down and the others fail naming `licensor migrate`.
func TestCommandsInAnEmptyFolderCreateNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"migrate", "status"}, {"migrate", "down"}, {"migrate", "down", "--force"},
		{"token", "list"}, {"token", "issue", "--consumer", "acme", "--abilities", "licenses:read"}, {"token", "revoke", "01JDQ8Z7F0A2B4C6D8E0G2H4J6"},
		{"intents", "list"}, {"intents", "show", "01JDQ8Z7F0A2B4C6D8E0G2H4J6"}, {"intents", "retry", "01JDQ8Z7F0A2B4C6D8E0G2H4J6"}, {"webhooks", "list"},
		{"keys", "status"}, {"keys", "rotate"}, {"prune"}, {"reconcile"}, {"drift"}, {"backup", "copy.sqlite"}} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), args, getenvOf(nil), &stdout, &stderr)
		switch {
		case strings.Join(args, " ") == "migrate status":
			if err != nil || !strings.Contains(stderr.String(), "none is applied") || !strings.Contains(stdout.String(), "00001_") ||
				strings.Contains(stdout.String(), "true") {
				t.Errorf("migrate status in an empty folder = %v\n%s%s; want every migration unapplied", err, stdout.String(), stderr.String())
			}
		case ExitCode(err) != 1 || !strings.Contains(err.Error(), "licensor migrate") && args[0] != "backup":
			t.Errorf("%q in an empty folder = %v (exit %d), want exit 1 naming `licensor migrate`", args, err, ExitCode(err))
		}
		if entries, _ := os.ReadDir("."); len(entries) > 0 {
			t.Fatalf("%q left %s behind in an empty folder", args, entries[0].Name())
		}
	}
	// migrate creates the database and the key; then status lists them applied.
	migrateHere(t, getenvOf(nil))
	for _, f := range []string{"storage/database.sqlite", "storage/app.key"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("migrate made no %s: %v", f, err)
		}
	}
}

// serve takes its address before it migrates: on a busy port it fails at
// once, naming APP_ADDR, and leaves no database (nor key) behind.
func TestServeOnABusyPortTouchesNoDatabase(t *testing.T) {
	t.Chdir(t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Run(context.Background(), []string{"serve"}, getenvOf(map[string]string{"APP_ADDR": ln.Addr().String()}), &bytes.Buffer{}, &bytes.Buffer{})
	if ExitCode(err) != 1 || !strings.Contains(err.Error(), "APP_ADDR") {
		t.Fatalf("serve on a busy port = %v, want exit 1 naming APP_ADDR", err)
	}
	if entries, _ := os.ReadDir("."); len(entries) > 0 {
		t.Errorf("serve on a busy port left %s behind", entries[0].Name())
	}
}
