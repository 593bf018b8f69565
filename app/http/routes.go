package http

import (
	"github.com/labstack/echo/v4"
)

// routes declares every route in one place, each with the middleware (and,
// later, the ability) it needs.
func (s *Server) routes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
}
