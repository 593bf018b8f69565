// Package database opens licensor's database (embedded SQLite or MySQL /
// MariaDB) and applies the versioned migrations embedded in the binary.
package database

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/licensor-api/licensor/config"
)

// Dialects licensor runs on.
const (
	SQLite = "sqlite"
	MySQL  = "mysql"
)

// Open connects to the configured database and checks that it answers.
// Times are read and written in UTC on both dialects.
func Open(ctx context.Context, cfg config.DB) (*gorm.DB, error) {
	dialector, err := dialectorFor(cfg)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(dialector, &gorm.Config{
		Logger:                 logger.Discard, // SQL never reaches the logs
		NowFunc:                func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		SkipDefaultTransaction: true, // every write here is one statement or an explicit transaction
		TranslateError:         true, // unique violations become gorm.ErrDuplicatedKey on both dialects
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Connection, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(cfg.MaxOpenConns)
	sqlDB.SetMaxIdleConns(cfg.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pingCtx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("connect to %s: %w", cfg.Redacted(), err)
	}
	return db, nil
}

func dialectorFor(cfg config.DB) (gorm.Dialector, error) {
	switch cfg.Connection {
	case SQLite:
		if dir := filepath.Dir(cfg.Database); dir != "." {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("create %s: %w", dir, err)
			}
		}
		return sqlite.Open(SQLiteDSN(cfg.Database)), nil
	case MySQL:
		dsn, err := MySQLDSN(cfg)
		if err != nil {
			return nil, err
		}
		return mysql.Open(dsn), nil
	}
	return nil, fmt.Errorf("unknown DB_CONNECTION %q", cfg.Connection)
}

// SQLiteDSN is the DSN for a SQLite file: WAL, a busy timeout, foreign keys,
// and transactions that take the write lock when they begin (so two writers
// wait for each other instead of failing to upgrade a read lock).
func SQLiteDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// MySQLDSN builds the go-sql-driver DSN from DB_URL or the DB_* fields,
// forcing what licensor relies on: parseTime, UTC and utf8mb4.
func MySQLDSN(cfg config.DB) (string, error) {
	var c *mysqldriver.Config
	if cfg.URL != "" {
		parsed, err := mysqldriver.ParseDSN(strings.TrimPrefix(cfg.URL, "mysql://"))
		if err != nil {
			return "", errors.New("DB_URL: not a valid MySQL DSN (user:pass@tcp(host:3306)/dbname)")
		}
		c = parsed
	} else {
		c = mysqldriver.NewConfig()
		c.User, c.Passwd = cfg.Username, cfg.Password
		c.Net, c.Addr = "tcp", fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
		c.DBName = cfg.Database
	}
	c.ParseTime = true
	c.Loc = time.UTC
	c.Collation = "utf8mb4_unicode_ci"
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	c.Timeout = 5 * time.Second
	return c.FormatDSN(), nil
}
