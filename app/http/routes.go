package http

import (
	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// routes declares every route in one place, each with the ability it needs,
// the way Sanctum's `ability:` middleware reads in a Laravel routes file.
func (s *Server) routes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	e.POST("/api/licenses", serve(s, s.ops.StoreLicense), s.ability(auth.LicensesWrite))
	e.GET("/api/licenses", s.listLicenses, s.ability(auth.LicensesRead))
	e.GET("/api/licenses/:id", s.showLicense, s.ability(auth.LicensesRead))
	e.GET("/api/licenses/:id/events", s.licenseEvents, s.ability(auth.LicensesRead))
	e.DELETE("/api/licenses/:id", serve(s, s.ops.RevokeLicense), s.ability(auth.LicensesWrite), licenseIDParam)
	e.GET("/api/operations/:id", s.showOperation, s.ability(auth.LicensesRead))

	e.GET("/api/intents", s.listIntents, s.ability(auth.IntentsManage))
	e.GET("/api/intents/:id", s.showIntent, s.ability(auth.IntentsManage))
	e.POST("/api/intents/:id/retry", s.retryIntent, s.ability(auth.IntentsManage))
	e.POST("/api/intents/:id/discard", s.discardIntent, s.ability(auth.IntentsManage))
	e.GET("/api/intents/:id/events", s.intentEvents, s.ability(auth.IntentsManage))

	// The vendor's webhooks: no token; the signature is the authentication,
	// and each event id is applied once (idempotency.Do).
	e.POST("/api/webhooks/vendor", s.vendorWebhook)

	e.POST("/api/tokens", s.issueToken, s.ability(auth.TokensManage))
	e.GET("/api/tokens", s.listTokens, s.ability(auth.TokensManage))
	// A static segment wins over :id in Echo's router, whatever the order;
	// :id has DELETE only, and no token id is "events" (a ULID).
	e.GET("/api/tokens/events", s.tokenEvents, s.ability(auth.TokensManage))
	e.DELETE("/api/tokens/:id", s.revokeToken, s.ability(auth.TokensManage))
}

// serve is the handler of a guarded operation's route: the principal is the
// operation's Call, and what the guard decided goes to the request's log
// line. The guard must list op (it panics here otherwise, as routes are
// built).
func serve[In any](s *Server, op idempotency.Operation[In]) echo.HandlerFunc {
	s.guard.MustServe(op)
	return func(c echo.Context) error {
		p := principal(c)
		note, err := op.Serve(s.guard, c, idempotency.Call{ConsumerID: p.ConsumerID, TokenID: p.TokenID, RequestID: RequestID(c)})
		noteIdempotency(c, note)
		return err
	}
}

// licenseIDParam answers 404 for an id that cannot be a license's (a ULID:
// 26 characters of Crockford's base32) before anything is recorded under it.
func licenseIDParam(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := ulid.ParseStrict(c.Param("id")); err != nil {
			return licenses.ErrNotFound
		}
		return next(c)
	}
}
