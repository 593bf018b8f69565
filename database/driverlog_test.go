package database

import (
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/licensor-api/licensor/internal/testkit"
)

// A line the MySQL driver prints becomes one JSON record of the
// application's logger: WARN, component=mysql, the driver's words as the
// message, formatted as log.Print would.
func TestDriverLoggerWritesOneJSONRecord(t *testing.T) {
	var out testkit.Buffer
	driverLogger{log: slog.New(slog.NewJSONHandler(&out, nil))}.Print("closing bad idle connection: ", io.ErrUnexpectedEOF)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want one:\n%s", len(lines), out.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %q: %v", lines[0], err)
	}
	if rec["level"] != "WARN" || rec["component"] != "mysql" || rec["msg"] != "closing bad idle connection: unexpected EOF" {
		t.Errorf("record %v, want level WARN, component mysql, msg %q", rec, "closing bad idle connection: unexpected EOF")
	}
}

// LogDriverTo installs the adapter as the driver's logger: a pool opened
// after it (a config the driver makes) prints through the slog logger.
func TestLogDriverToInstallsTheAdapter(t *testing.T) {
	t.Cleanup(func() { // the driver's own default again
		_ = mysqldriver.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime))
	})
	var out testkit.Buffer
	LogDriverTo(slog.New(slog.NewJSONHandler(&out, nil)))
	mysqldriver.NewConfig().Logger.Print("unexpected EOF")
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &rec); err != nil || rec["component"] != "mysql" {
		t.Errorf("the driver printed %q through the installed logger, want one JSON record with component=mysql (%v)", out.String(), err)
	}
}
