package http

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/request"
)

const ctxPrincipal = "principal"

var (
	errUnauthenticated = &Error{Status: http.StatusUnauthorized, Message: "Unauthenticated."}
	errMissingAbility  = &Error{Status: http.StatusForbidden, Message: "Invalid ability provided.", Code: "missing_ability"}
)

// ability is Sanctum's `ability:` middleware: admit, then the route's
// handler, a write holding its consumer's slot while it runs. Routes
// declare it in routes.go; a guarded operation's route admits its requests
// itself (guarded).
func (s *Server) ability(need string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			_, release, err := s.admit(c, need, nil)
			if err != nil {
				return err
			}
			defer release()
			return next(c)
		}
	}
}

// admit authenticates the bearer token, counts the request against its
// consumer's rate limit (throttle, in ratelimit.go), then requires that the
// token carries need. The principal is kept as soon as the token is
// verified, so that the access line of a request refused after
// authentication (429, 403 missing_ability) names the token that asked too.
// joined, when not nil, is read in the token row's statement. Then every
// parameter of the route's path must be an id that can exist (pathIDs), as
// Laravel's route model binding runs after the route's auth and throttle
// middleware. Last, a write takes one of its consumer's slots (holdWrite).
// It returns the principal it kept and the function that gives the slot
// back.
func (s *Server) admit(c echo.Context, need string, joined auth.TokenRowJoin) (auth.Principal, func(), error) {
	p, err := s.authenticate(c, joined)
	if err != nil {
		return auth.Principal{}, nil, err
	}
	c.Set(ctxPrincipal, p)
	if err := s.throttle(c, p); err != nil {
		return auth.Principal{}, nil, err
	}
	if !p.Abilities.Can(need) {
		return auth.Principal{}, nil, errMissingAbility
	}
	if err := pathIDs(c); err != nil {
		return auth.Principal{}, nil, err
	}
	release, err := s.holdWrite(c, p)
	return p, release, err
}

// pathIDs answers 404 for a route whose path parameters are not all ids
// licensor could have made (request.IsID: every :id and :delivery is a
// ULID), before anything is read or recorded under them.
func pathIDs(c echo.Context) error {
	for i := range c.ParamNames() {
		if !request.IsID(c.ParamValues()[i]) {
			return errNotFound
		}
	}
	return nil
}

// authenticate verifies the bearer token, reading joined with its row. Every
// reason for refusing it is the same 401, so a caller learns nothing about
// why; two Authorization headers are refused too, rather than one of them
// picked.
func (s *Server) authenticate(c echo.Context, joined auth.TokenRowJoin) (auth.Principal, error) {
	values := c.Request().Header.Values(echo.HeaderAuthorization)
	if len(values) != 1 {
		return auth.Principal{}, errUnauthenticated
	}
	scheme, raw, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(raw) == "" {
		return auth.Principal{}, errUnauthenticated
	}
	p, err := s.auth.VerifyWith(c.Request().Context(), strings.TrimSpace(raw), joined)
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
