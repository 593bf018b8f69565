package http

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"
)

type statusBody struct {
	Status string `json:"status"`
}

// healthz answers while the process runs.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}

// writeProber is how the database proves it takes writes: the dialector of
// every database package database opens implements it (database.ProbeWrite),
// and this package, which imports no database package, finds it there.
type writeProber interface {
	ProbeWrite(ctx context.Context, db *gorm.DB, now time.Time) error
}

// errNoProbe is a database not opened by package database, which offers no
// readiness probe.
var errNoProbe = errors.New("the database offers no readiness probe")

// readyz answers 200 when the database takes a write within two seconds: it
// writes a probe row and deletes it again, leaving nothing behind. A ping
// alone would pass on a SQLite file whose disk is full.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.probeWrite(ctx); err != nil {
		s.log.Warn("readiness: the database does not take writes", "request_id", RequestID(c), "error", err)
		return &Error{Status: http.StatusServiceUnavailable, Message: "The database is unavailable.", Code: "database_unavailable",
			RetryAfter: unavailableRetryAfter}
	}
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}

func (s *Server) probeWrite(ctx context.Context) error {
	p, ok := s.db.Dialector.(writeProber)
	if !ok {
		return errNoProbe
	}
	return p.ProbeWrite(ctx, s.db, s.now())
}
