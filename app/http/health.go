package http

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

type statusBody struct {
	Status string `json:"status"`
}

// healthz answers while the process runs.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}

// readyz answers 200 when the database takes a write within two seconds: it
// writes a probe row and deletes it again, leaving nothing behind. A ping
// alone would pass on a SQLite file whose disk is full.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		s.log.Warn("readiness: the database does not take writes", "request_id", RequestID(c), "error", err)
		return &Error{Status: http.StatusServiceUnavailable, Message: "The database is unavailable.", Code: "database_unavailable",
			RetryAfter: unavailableRetryAfter}
	}
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}
