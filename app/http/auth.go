package http

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
)

const ctxPrincipal = "principal"

var (
	errUnauthenticated = &Error{Status: http.StatusUnauthorized, Message: "Unauthenticated."}
	errMissingAbility  = &Error{Status: http.StatusForbidden, Message: "Invalid ability provided.", Code: "missing_ability"}
)

// ability is Sanctum's `ability:` middleware: it authenticates the bearer
// token, counts the request against its consumer's rate limit (throttle, in
// ratelimit.go), then requires that the token carries need. Routes declare it
// in routes.go. The principal is kept as soon as the token is verified, so
// that the access line of a request refused after authentication (429, 403
// missing_ability) names the token that asked too.
func (s *Server) ability(need string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, err := s.authenticate(c)
			if err != nil {
				return err
			}
			c.Set(ctxPrincipal, p)
			if err := s.throttle(c, p); err != nil {
				return err
			}
			if !p.Abilities.Can(need) {
				return errMissingAbility
			}
			return next(c)
		}
	}
}

// authenticate verifies the bearer token. Every reason for refusing it is
// the same 401, so a caller learns nothing about why; two Authorization
// headers are refused too, rather than one of them picked.
func (s *Server) authenticate(c echo.Context) (auth.Principal, error) {
	values := c.Request().Header.Values(echo.HeaderAuthorization)
	if len(values) != 1 {
		return auth.Principal{}, errUnauthenticated
	}
	h := values[0]
	scheme, raw, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(raw) == "" {
		return auth.Principal{}, errUnauthenticated
	}
	p, err := s.auth.Verify(c.Request().Context(), strings.TrimSpace(raw))
	if errors.Is(err, auth.ErrUnauthenticated) {
		return auth.Principal{}, errUnauthenticated
	}
	return p, err
}

// principal returns who the request's token speaks for; routes behind
// ability always have one.
func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(ctxPrincipal).(auth.Principal)
	return p
}
