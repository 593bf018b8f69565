// Package database opens licensor's database (embedded SQLite or MySQL /
// MariaDB) and applies the versioned migrations embedded in the binary.
package database

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/libtnb/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/wait"
)

// Dialects licensor runs on.
const (
	SQLite = "sqlite"
	MySQL  = "mysql"
)

// Open connects to the configured database and checks that it answers.
// Times are read and written in UTC on both dialects.
//
// On SQLite, the first connection to a fresh file switches it to WAL, and of
// several processes doing so at once the losers get SQLITE_BUSY at once,
// whatever the busy timeout: the switch upgrades a read lock to a write lock,
// and SQLite does not wait there because waiting could deadlock. Open then
// tries again after a short pause, for as long as the busy timeout or until
// ctx ends, by which time the winner has made the file WAL.
func Open(ctx context.Context, cfg config.DB) (*gorm.DB, error) {
	return openRetrying(ctx, cfg, false)
}

// OpenReader opens the pool for the hot reads beside writer, the pool Open
// returned. On SQLite it is DB_READ_CONNS query_only connections: in WAL mode
// readers never wait for the writer, nor queue behind a write for the one
// writing connection, and each sees every write committed before it began.
// On MySQL it returns writer.
func OpenReader(ctx context.Context, cfg config.DB, writer *gorm.DB) (*gorm.DB, error) {
	if cfg.Connection != SQLite {
		return writer, nil
	}
	return openRetrying(ctx, cfg, true)
}

func openRetrying(ctx context.Context, cfg config.DB, readOnly bool) (*gorm.DB, error) {
	deadline := time.Now().Add(sqliteBusyTimeout(cfg))
	for attempt := 1; ; attempt++ {
		db, err := open(ctx, cfg, readOnly)
		if err == nil || cfg.Connection != SQLite || !isSQLiteBusy(err) || time.Now().After(deadline) {
			return db, err
		}
		if wait.Sleep(ctx, min(jittered(attempt, 5*time.Millisecond), 100*time.Millisecond)) != nil {
			return nil, err
		}
	}
}

func open(ctx context.Context, cfg config.DB, readOnly bool) (*gorm.DB, error) {
	dialector, err := dialectorFor(cfg, readOnly)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(classifying{Dialector: dialector, rate: &rateQuery{}}, &gorm.Config{
		Logger:                 logger.Discard, // SQL never reaches the logs
		NowFunc:                dbtime.Now,
		SkipDefaultTransaction: true, // every write here is one statement or an explicit transaction
		// Unique violations become gorm.ErrDuplicatedKey on both dialects, and
		// "not now" errors an *UnavailableError (see classifying).
		TranslateError: true,
		// No GORM statement cache: on SQLite the driver keeps each
		// connection's statements (see stmtcache.go), which also serves the
		// statements of transactions; on MySQL no statement is prepared on
		// the server (see MySQLDSN).
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Connection, err)
	}
	if err := boundStatements(db, queryTimeout(cfg), cfg.Connection == SQLite); err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Connection, err)
	}
	if err := db.Use(timeoutPlugin(queryTimeout(cfg))); err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Connection, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	open, idle := cfg.MaxOpenConns, cfg.MaxIdleConns
	if readOnly {
		open, idle = readConns(cfg), readConns(cfg)
	}
	sqlDB.SetMaxOpenConns(open)
	sqlDB.SetMaxIdleConns(idle)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pingCtx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("connect to %s: %w", cfg.Redacted(), err)
	}
	return db, nil
}

// ownerOnly makes the SQLite file readable by its owner alone (0600), made
// empty if it does not exist yet: SQLite creates its -wal and -shm files with
// the database file's permissions, and the file holds every consumer's data.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	info, err := f.Stat()
	err = errors.Join(err, f.Close())
	if err == nil && info.Mode().Perm()&0o077 != 0 {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		return fmt.Errorf("make %s owner-only: %w", path, err)
	}
	return nil
}

// queryTimeout is DB_QUERY_TIMEOUT, or its default for a hand-made config.
func queryTimeout(cfg config.DB) time.Duration {
	if cfg.QueryTimeout > 0 {
		return cfg.QueryTimeout
	}
	return 5 * time.Second
}

func forDialect(db *gorm.DB, sqlite, mysql string) string {
	if db.Dialector.Name() == MySQL {
		return mysql
	}
	return sqlite
}

// Close closes the connection pool underneath db.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// isSQLiteBusy is also true of SQLITE_BUSY's extended codes.
func isSQLiteBusy(err error) bool {
	code, ok := sqliteCode(err)
	return ok && code == sqliteBusy
}

const sqliteBusy = 5 // SQLITE_BUSY

// readConns defaults to one per usable CPU, at least two.
func readConns(cfg config.DB) int {
	if cfg.ReadConns > 0 {
		return cfg.ReadConns
	}
	return max(runtime.GOMAXPROCS(0), 2)
}

func dialectorFor(cfg config.DB, readOnly bool) (gorm.Dialector, error) {
	switch cfg.Connection {
	case SQLite:
		if dir := filepath.Dir(cfg.Database); dir != "." {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("create %s: %w", dir, err)
			}
		}
		if err := ownerOnly(cfg.Database); err != nil {
			return nil, err
		}
		dsn := SQLiteDSN(cfg)
		if readOnly {
			dsn = SQLiteReadDSN(cfg)
		}
		if _, err := registerCachingDriver(); err != nil {
			return nil, err
		}
		name := sqliteCachingDriverName
		if cfg.SQLiteDriver != "" {
			name = cfg.SQLiteDriver
		}
		return sqlite.New(sqlite.Config{DriverName: name, DSN: dsn}), nil
	case MySQL:
		dsn, err := MySQLDSN(cfg)
		if err != nil {
			return nil, err
		}
		return mysql.Open(dsn), nil
	}
	return nil, fmt.Errorf("unknown DB_CONNECTION %q", cfg.Connection)
}

const sqliteMaxBusyTimeout = 10 * time.Second

// sqliteBusyTimeout is how long a SQLite statement waits for a lock another
// connection holds before it fails with SQLITE_BUSY. It also bounds what no
// statement deadline reaches: the BEGIN IMMEDIATE of a transaction begun on a
// context without a deadline (every GORM transaction of a request, the group
// commit's writer). The driver's busy handler stops sooner if ctx ends.
func sqliteBusyTimeout(cfg config.DB) time.Duration {
	return min(sqliteMaxBusyTimeout, queryTimeout(cfg))
}

// SQLiteDSN is the DSN Open uses for the SQLite file cfg.Database: a busy
// timeout, WAL, foreign keys, and transactions that take the write lock when
// they begin (so two writers wait for each other instead of failing to
// upgrade a read lock).
//
// The driver runs the _pragma values in order on every new connection, so
// busy_timeout comes first and the switch to WAL waits for a lock too,
// wherever SQLite waits at all (see Open).
// Times are written in UTC as "2006-01-02 15:04:05.999999999-07:00", the
// text every row holds since the first release: text order is time order,
// which the expires_at and cursor comparisons rely on.
func SQLiteDSN(cfg config.DB) string {
	return sqliteDSN(cfg, false)
}

// SQLiteReadDSN is SQLiteDSN for the read pool (query_only): a write sent to
// it by mistake fails loudly instead of taking the write lock.
func SQLiteReadDSN(cfg config.DB) string {
	return sqliteDSN(cfg, true)
}

func sqliteDSN(cfg config.DB, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout(cfg).Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	}
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	q.Set("_timezone", "UTC")
	// Only a column declared DATETIME reads back as a time (as it always
	// has): an expression's text stays text, whatever it looks like.
	q.Set("_texttotime", "0")
	return "file:" + cfg.Database + "?" + q.Encode()
}

// MySQLDSN builds the go-sql-driver DSN from DB_URL or the DB_* fields,
// forcing what licensor relies on: parseTime, UTC and utf8mb4.
func MySQLDSN(cfg config.DB) (string, error) {
	var c *mysqldriver.Config
	if cfg.URL != "" {
		var err error
		if c, err = parseMySQLURL(cfg.URL); err != nil {
			return "", errors.New("DB_URL: not a valid MySQL DSN (user:pass@tcp(host:3306)/dbname)")
		}
	} else {
		c = mysqldriver.NewConfig()
		c.User, c.Passwd = cfg.Username, cfg.Password
		c.Net, c.Addr = "tcp", fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
		c.DBName = cfg.Database
	}
	c.ParseTime = true
	c.Loc = time.UTC
	// A compare-and-set asks "did my WHERE match?": MySQL otherwise reports
	// only the rows an UPDATE changed, and an update that writes the values a
	// row already holds (a frozen clock, two writes in one microsecond) would
	// look like a lost lease.
	c.ClientFoundRows = true
	// Statements go as text, arguments escaped in by the driver (safe with
	// utf8mb4), never server-side prepared (Open turns GORM's off too): on
	// a MariaDB Galera node, a transaction aborted by a replicated write
	// ("brute force") while running prepared statements could have COMMIT
	// answer success having committed nothing: up to one in a hundred under
	// TestGaleraReplicaStorm's aborts, none as text.
	c.InterpolateParams = true
	c.Collation = "utf8mb4_unicode_ci"
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	c.Timeout = 5 * time.Second
	// A frozen server fails a read or a write at the socket too, not only
	// through the statement's context.
	c.ReadTimeout, c.WriteTimeout = 2*queryTimeout(cfg), 2*queryTimeout(cfg)
	return c.FormatDSN(), nil
}

// parseMySQLURL reads DB_URL: a go-sql-driver DSN, that DSN after
// "mysql://", or a URL, mysql://user:pass@host[:3306]/dbname[?params].
func parseMySQLURL(s string) (*mysqldriver.Config, error) {
	rest, isURL := strings.CutPrefix(s, "mysql://")
	if !isURL || strings.Contains(rest, "(") {
		return mysqldriver.ParseDSN(rest)
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, errors.New("not a MySQL URL")
	}
	c := mysqldriver.NewConfig()
	c.User = u.User.Username()
	c.Passwd, _ = u.User.Password()
	c.Net, c.Addr = "tcp", u.Host
	if u.Port() == "" {
		c.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	c.DBName = strings.TrimPrefix(u.Path, "/")
	// The query's parameters are the DSN's: go through the driver's parser.
	if u.RawQuery != "" {
		withParams, err := mysqldriver.ParseDSN("/?" + u.RawQuery)
		if err != nil {
			return nil, err
		}
		withParams.User, withParams.Passwd, withParams.Net, withParams.Addr, withParams.DBName = c.User, c.Passwd, c.Net, c.Addr, c.DBName
		c = withParams
	}
	return c, nil
}
