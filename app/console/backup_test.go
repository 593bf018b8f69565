package console

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

func backupRun(t *testing.T, vars map[string]string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), append([]string{"backup"}, args...), getenvOf(vars), &stdout, &stderr)
	return stdout.String(), err
}

// `licensor backup FILE` writes a SQLite database that opens, migrated and
// whole, readable by its owner only; it never overwrites a file, and it
// says what to do instead on MySQL, or when there is no database.
func TestBackupCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	db := testdb.New(t, database.SQLite)
	if err := db.Gorm.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('c1', 'acme', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)").Error; err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"APP_ENV": "testing", "DB_DATABASE": db.Config.Database}
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.sqlite")

	out, err := backupRun(t, vars, file)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if !strings.Contains(out, file) {
		t.Errorf("stdout %q does not name the file", out)
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("the copy is mode %o, want 600", perm)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	copied, err := database.OpenMigrated(context.Background(), testdbConfig(file), nil)
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer database.Close(copied)
	var name string
	if err := copied.Raw("SELECT name FROM consumers WHERE id = 'c1'").Scan(&name).Error; err != nil || name != "acme" {
		t.Errorf("the copy's consumer: %q, %v", name, err)
	}
	m, err := database.NewMigrator(copied)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckCurrent(context.Background()); err != nil {
		t.Errorf("the copy's schema: %v", err)
	}

	before, _ := os.ReadFile(file)
	if _, err := backupRun(t, vars, file); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("backup over an existing file: %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Error("the refused backup changed the existing file")
	}

	mysql := map[string]string{"APP_ENV": "testing", "DB_CONNECTION": "mysql", "DB_HOST": "127.0.0.1", "DB_PORT": "1"}
	if _, err := backupRun(t, mysql, filepath.Join(dir, "mysql.sqlite")); !errors.Is(err, database.ErrBackupMySQL) ||
		!strings.Contains(err.Error(), "mysqldump --single-transaction") || ExitCode(err) != 1 {
		t.Errorf("backup on MySQL: %v (exit %d), want the refusal naming mysqldump --single-transaction", err, ExitCode(err))
	}

	missing := map[string]string{"APP_ENV": "testing", "DB_DATABASE": filepath.Join(dir, "nowhere.sqlite")}
	if _, err := backupRun(t, missing, filepath.Join(dir, "b2.sqlite")); err == nil || !strings.Contains(err.Error(), "no SQLite database") {
		t.Errorf("backup of a missing database: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nowhere.sqlite")); !errors.Is(err, os.ErrNotExist) {
		t.Error("backing up a missing database created it")
	}

	for _, args := range [][]string{nil, {"a", "b"}, {"--bogus", "x"}} {
		if _, err := backupRun(t, vars, args...); ExitCode(err) != 2 {
			t.Errorf("backup %q: %v, want a usage error (exit 2)", args, err)
		}
	}
}

// BackupSQLite refuses a MySQL connection, pointing at mysqldump.
func TestBackupSQLiteRefusesMySQL(t *testing.T) {
	db := testdb.New(t, database.MySQL) // skips without TEST_MYSQL_DSN
	file := filepath.Join(t.TempDir(), "b.sqlite")
	if err := database.BackupSQLite(context.Background(), db.Gorm, file); !errors.Is(err, database.ErrBackupMySQL) {
		t.Errorf("BackupSQLite on MySQL: %v, want ErrBackupMySQL", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused backup left a file")
	}
}

// testdbConfig is a SQLite file's connection settings.
func testdbConfig(path string) config.DB {
	return config.DB{Connection: database.SQLite, Database: path, MaxOpenConns: 1, MaxIdleConns: 1}
}
