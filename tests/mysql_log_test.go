package tests

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// mysqlUserOf creates a MySQL user of the test's own with every privilege
// on the test's database, dropped when the test ends, and returns the
// database's DSN for it: the connections made with it are the processes'
// under test, which the test can tell from its own.
func mysqlUserOf(t *testing.T, db *testdb.DB) (dsn, user string) {
	t.Helper()
	c, err := mysqldriver.ParseDSN(db.Config.URL)
	if err != nil {
		t.Fatal(err)
	}
	user = "lic_" + db.Config.Database[len(db.Config.Database)-12:]
	for _, stmt := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY ''",
		"GRANT ALL PRIVILEGES ON `" + db.Config.Database + "`.* TO '" + user + "'@'%'",
	} {
		if err := db.Gorm.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		if err := db.Gorm.Exec("DROP USER IF EXISTS '" + user + "'@'%'").Error; err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
	c.User, c.Passwd = user, ""
	return c.FormatDSN(), user
}

// killConnections kills, through the test's own pool, every connection of
// the MySQL user, as a server restart or an operator's KILL would; it
// returns how many it killed.
func killConnections(t *testing.T, db *testdb.DB, user string) int {
	t.Helper()
	var ids []int64
	if err := db.Gorm.Raw("SELECT id FROM information_schema.processlist WHERE user = ?", user).Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var me *mysqldriver.MySQLError
		if err := db.Gorm.Exec("KILL CONNECTION ?", id).Error; err != nil && !(errors.As(err, &me) && me.Number == 1094) { // 1094: gone already
			t.Fatalf("KILL CONNECTION %d: %v", id, err)
		}
	}
	return len(ids)
}

// With LOG_FORMAT=json every line serve writes is JSON, also while its
// MariaDB connections are killed under it: the MySQL driver's own reports
// of the dead connections ("closing bad idle connection", "unexpected
// EOF") come through the application's logger as WARN records with
// component=mysql, instead of "[mysql] …" plain text in the JSON stream.
func TestServeLogsOnlyJSONWhenMySQLConnectionsDie(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the licensor binary")
	}
	db := testdb.New(t, database.MySQL) // skipped without TEST_MYSQL_DSN (failed under CI=true)
	dsn, user := mysqlUserOf(t, db)
	addr := testkit.FreeAddr(t)
	env := faultEnv(t, db, "", "VENDOR_DRIVER=fake", "DB_URL="+dsn, "APP_ADDR="+addr) // as user, whose connections the test kills
	token := issueToken(t, env)
	serve := start(t, env, "serve")
	api := "http://" + addr
	waitFor(t, api+"/readyz", "", http.StatusOK)
	if code, _, body := send(api+"/api/licenses", http.MethodGet, token, "", ""); code != http.StatusOK {
		t.Fatalf("GET /api/licenses = %d %s", code, body)
	}

	killed := 0
	driverSpoke := func() bool {
		killed += killConnections(t, db, user)
		send(api+"/api/licenses", http.MethodGet, token, "", "")
		send(api+"/readyz", http.MethodGet, "", "", "")
		return strings.Contains(serve.output.String(), `"component":"mysql"`)
	}
	if !testkit.Poll(20*time.Second, driverSpoke) {
		t.Fatalf("%d connections killed, and no line of the MySQL driver in serve's log:\n%s", killed, serve.output.String())
	}
	// The pool has new connections: serve goes on.
	waitFor(t, api+"/readyz", "", http.StatusOK)

	driverLines := 0
	for _, line := range strings.Split(serve.output.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("serve wrote a line that is not JSON: %q", line)
			continue
		}
		if rec["component"] == "mysql" {
			driverLines++
			if rec["level"] != "WARN" {
				t.Errorf("a driver line at %v, want WARN: %s", rec["level"], line)
			}
		}
	}
	t.Logf("%d connections killed; serve logged %d line(s) of the MySQL driver, every line JSON", killed, driverLines)
}
