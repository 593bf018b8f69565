package database

import (
	"fmt"
	"log/slog"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// driverLogger is the MySQL driver's Logger on an slog.Logger: each line
// the driver writes of its own (a connection it found dead, a packet cut
// short: "unexpected EOF", "closing bad idle connection: …") becomes one
// record at WARN with component=mysql, instead of a plain-text "[mysql] …"
// line on stderr that breaks a LOG_FORMAT=json stream. The driver's lines
// name errors and addresses, never a password or a statement's values.
type driverLogger struct {
	log *slog.Logger
}

// Print implements mysqldriver.Logger, with log.Print's formatting.
func (l driverLogger) Print(v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprint(v...)), "component", "mysql")
}

// LogDriverTo routes the MySQL driver's own log lines to log (at WARN, with
// component=mysql) instead of the driver's default, plain text on stderr.
// The driver keeps one logger for the whole process and gives it to each
// pool as the pool is opened: call LogDriverTo once, where the process
// builds its logger, before it opens a database.
func LogDriverTo(log *slog.Logger) {
	_ = mysqldriver.SetLogger(driverLogger{log: log}) // fails only on a nil logger
}
