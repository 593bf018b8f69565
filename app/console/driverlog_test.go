package console

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
)

// A command's logger gets the MySQL driver's own lines too (loadConfig
// installs it): with LOG_FORMAT=json, a command whose MySQL server hangs up
// during the handshake writes the driver's line on the command's stderr as
// a JSON record (component=mysql), not as "[mysql] …" plain text on the
// process's stderr; every line is JSON.
func TestCommandsLogTheMySQLDriverAsJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close() // before the server's greeting: the driver reads EOF
		}
	}()
	t.Cleanup(restoreMySQLDriverLogger)
	t.Chdir(t.TempDir())
	stderr := &testkit.Buffer{}
	env := getenvOf(map[string]string{"DB_CONNECTION": "mysql", "DB_URL": "root@tcp(" + ln.Addr().String() + ")/licensor", "LOG_FORMAT": "json"})
	if err := Run(context.Background(), []string{"migrate", "status"}, env, &bytes.Buffer{}, stderr); err == nil {
		t.Fatal("migrate status against a server that hangs up succeeded")
	}
	driverLines := 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line on stderr is not JSON: %q", line)
			continue
		}
		if rec["component"] == "mysql" {
			driverLines++
			if rec["level"] != "WARN" {
				t.Errorf("the driver's line at %v, want WARN: %q", rec["level"], line)
			}
		}
	}
	if driverLines == 0 {
		t.Errorf("no line of the MySQL driver on the command's stderr:\n%s", stderr.String())
	}
}

// restoreMySQLDriverLogger points the MySQL driver's lines at the test
// process's stderr again, so that no later test's go to a spent buffer.
func restoreMySQLDriverLogger() {
	database.LogDriverTo(slog.New(slog.NewTextHandler(os.Stderr, nil)))
}
