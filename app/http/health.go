package http

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/internal/fault"
)

type statusBody struct {
	Status string `json:"status"`
}

// notReadyBody is /readyz's 503: the usual error shape (message, code),
// plus the check that failed.
type notReadyBody struct {
	Message string `json:"message"`
	Code    string `json:"code"`
	Check   string `json:"check"`
}

// notReadyMessages are the messages of the checks /readyz names: a
// readiness error's code is its check (database.CheckDisk, CheckDatabase).
var notReadyMessages = map[string]string{
	"database": "The database is unavailable.",
	"disk":     "The database's disk takes no write.",
}

// healthz answers while the process runs.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}

// readyz answers 200 when the database takes a write within two seconds
// (Deps.Ready: on SQLite a write to the disk beside the file, then a probe
// row written and deleted again, leaving nothing behind). Otherwise 503
// database_unavailable with Retry-After, naming the check that failed.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	err := s.ready(ctx)
	if err == nil {
		return c.JSON(http.StatusOK, statusBody{Status: "ok"})
	}
	check := fault.Code(err)
	if notReadyMessages[check] == "" {
		check = "database"
	}
	s.log.Warn("readiness: the database does not take writes", "request_id", RequestID(c), "check", check, "error", err)
	c.Response().Header().Set("Retry-After", strconv.Itoa(unavailableRetryAfter))
	return c.JSON(http.StatusServiceUnavailable, notReadyBody{Message: notReadyMessages[check], Code: "database_unavailable", Check: check})
}
