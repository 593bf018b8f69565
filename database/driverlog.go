package database

import (
	"fmt"
	"log/slog"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// driverLogger keeps the driver's plain "[mysql] …" lines out of stderr, where
// they would break a LOG_FORMAT=json stream. They name errors and addresses,
// never a password or a statement's values.
type driverLogger struct {
	log *slog.Logger
}

// Print implements mysqldriver.Logger, with log.Print's formatting.
func (l driverLogger) Print(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprint(v...)), "component", "mysql")
}

// LogDriverTo routes the MySQL driver's own log lines ("closing bad idle
// connection", …) to log at WARN with component=mysql. The driver has one
// logger per process, given to each pool as it opens: call LogDriverTo once,
// before opening a database.
func LogDriverTo(log *slog.Logger) {
	_ = mysqldriver.SetLogger(driverLogger{log: log}) // fails only on a nil logger
}
