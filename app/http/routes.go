package http

import (
	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
)

// routes declares every route in one place, each with the ability it needs,
// the way Sanctum's `ability:` middleware reads in a Laravel routes file.
func (s *Server) routes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	e.POST("/api/tokens", s.issueToken, s.ability(auth.TokensManage))
	e.GET("/api/tokens", s.listTokens, s.ability(auth.TokensManage))
	e.DELETE("/api/tokens/:id", s.revokeToken, s.ability(auth.TokensManage))
}
