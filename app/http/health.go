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

// readyz answers 200 when the database answers a ping within two seconds.
func (s *Server) readyz(c echo.Context) error {
	sqlDB, err := s.db.DB()
	if err == nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		err = sqlDB.PingContext(ctx)
	}
	if err != nil {
		s.log.Warn("readiness: database does not answer", "request_id", RequestID(c), "error", err)
		return &Error{Status: http.StatusServiceUnavailable, Message: "The database is unavailable.", Code: "database_unavailable"}
	}
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}
