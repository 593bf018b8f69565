// Package testdb gives each test a fresh, migrated database of its own: SQLite
// in a temporary directory always, and MySQL too when TEST_MYSQL_DSN is set
// (for example root@tcp(127.0.0.1:3306)/). In CI (CI=true) a missing or
// unreachable MySQL fails the test instead of skipping it.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// seedTimeout bounds a test database's statements: generous, since tests
// seed thousands of rows in one statement, under the race detector too.
// (Tests of the statement deadline set their own.)
const seedTimeout = time.Minute

// DB is one test's database.
type DB struct {
	Dialect string
	Config  config.DB
	Gorm    *gorm.DB
	// Read is the read pool the application reads through (SQLite's
	// read-only pool; Gorm itself on MySQL), as serve opens it.
	Read *gorm.DB
}

// Each runs fn as a sub-test once per dialect, each with a fresh migrated
// database: "sqlite" always, "mysql" when TEST_MYSQL_DSN is set.
func Each(t *testing.T, fn func(t *testing.T, db *DB)) {
	t.Helper()
	for _, dialect := range []string{database.SQLite, database.MySQL} {
		t.Run(dialect, func(t *testing.T) {
			fn(t, New(t, dialect))
		})
	}
}

// New returns a fresh database of the dialect, migrated up, closed and (for
// MySQL) dropped when the test ends.
func New(t testing.TB, dialect string) *DB {
	t.Helper()
	db := Empty(t, dialect)
	m, err := database.NewMigrator(db.Gorm)
	if err != nil {
		t.Fatalf("migrator: %v", err)
	}
	if _, err := m.Up(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	read, err := database.OpenReader(context.Background(), db.Config, db.Gorm)
	if err != nil {
		t.Fatalf("open the read pool: %v", err)
	}
	if read != db.Gorm {
		t.Cleanup(func() { _ = database.Close(read) })
	}
	db.Read = read
	return db
}

// Empty returns a fresh database with no tables at all.
func Empty(t testing.TB, dialect string) *DB {
	t.Helper()
	var cfg config.DB
	switch dialect {
	case database.SQLite:
		cfg = config.DB{Connection: database.SQLite, Database: filepath.Join(t.TempDir(), "test.sqlite"), MaxOpenConns: 1, MaxIdleConns: 1,
			QueryTimeout: seedTimeout}
	case database.MySQL:
		cfg = mysqlDatabase(t)
	default:
		t.Fatalf("unknown dialect %q", dialect)
	}
	g, err := database.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s: %v", dialect, err)
	}
	t.Cleanup(func() {
		if sqlDB, err := g.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return &DB{Dialect: dialect, Config: cfg, Gorm: g}
}

// MySQLDSN returns TEST_MYSQL_DSN, skipping the test when it is unset
// (failing it under CI=true).
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return fromEnv(t, mysqlService)
}

// service is what a test needs of a server outside the test: the variable
// that names it, an example value, and what runs only with it.
type service struct{ variable, example, what string }

var (
	mysqlService = service{"TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/", "MySQL half"}
	redisService = service{"TEST_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis tests"}
)

// fromEnv is the service's variable, or the test skipped (when the
// variable is unset) or failed (when it is unset under CI=true).
func fromEnv(t testing.TB, s service) string {
	t.Helper()
	value, skip, err := s.policy(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	return value
}

// policy decides what a test of the service does: run against value, skip
// with a reason that says how to run it, or fail, which is what a missing
// value means under CI=true.
func (s service) policy(getenv func(string) string) (value, skip string, err error) {
	if value = getenv(s.variable); value != "" {
		return value, "", nil
	}
	if getenv("CI") == "true" {
		return "", "", fmt.Errorf("CI=true but %s is not set: the %s must run in CI", s.variable, s.what)
	}
	return "", fmt.Sprintf("%s skipped: set %s=%s to run it", s.what, s.variable, s.example), nil
}

// mysqlDatabase creates a database of the test's own and drops it at the end.
func mysqlDatabase(t testing.TB) config.DB {
	t.Helper()
	base, err := mysqldriver.ParseDSN(MySQLDSN(t))
	if err != nil {
		t.Fatalf("TEST_MYSQL_DSN: %v", err)
	}
	admin, err := sql.Open("mysql", base.FormatDSN())
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	defer admin.Close()
	if err := admin.Ping(); err != nil {
		t.Fatalf("MySQL at TEST_MYSQL_DSN does not answer: %v", err)
	}
	name := "licensor_test_" + randomHex(6)
	if _, err := admin.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("mysql", base.FormatDSN())
		if err != nil {
			return
		}
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	c := *base
	c.DBName = name
	return config.DB{Connection: database.MySQL, URL: c.FormatDSN(), Database: name, MaxOpenConns: 20, MaxIdleConns: 10,
		QueryTimeout: seedTimeout}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
