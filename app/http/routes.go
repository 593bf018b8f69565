package http

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/request"
)

// routes declares every route in one place, each with the ability it needs,
// the way Sanctum's `ability:` middleware reads in a Laravel routes file.
func (s *Server) routes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	e.POST("/api/licenses", guarded(s, s.ops.StoreLicense, auth.LicensesWrite, headerKey, func(c echo.Context, body []byte) (licenses.Input, []byte, error) {
		return request.BindStoreLicense(c.Request().Header.Get(echo.HeaderContentType), body)
	}))
	e.GET("/api/licenses", s.listLicenses, s.ability(auth.LicensesRead))
	e.GET("/api/licenses/:id", s.showLicense, s.ability(auth.LicensesRead))
	e.GET("/api/licenses/:id/events", s.licenseEvents, s.ability(auth.LicensesRead))
	e.DELETE("/api/licenses/:id", guarded(s, s.ops.RevokeLicense, auth.LicensesWrite, // the license's id is the key
		func(c echo.Context, _ *idempotency.Guard) (string, error) { return c.Param("id"), nil },
		func(c echo.Context, _ []byte) (string, []byte, error) { return c.Param("id"), nil, nil }))
	e.POST("/api/licenses/:id/rotate-key", guarded(s, s.ops.RotateLicenseKey, auth.LicensesWrite, headerKey, licenseID))
	e.GET("/api/operations/:id", s.showOperation, s.ability(auth.LicensesRead))

	e.GET("/api/intents", s.listIntents, s.ability(auth.IntentsManage))
	e.GET("/api/intents/:id", s.showIntent, s.ability(auth.IntentsManage))
	e.POST("/api/intents/:id/retry", s.retryIntent, s.ability(auth.IntentsManage))
	e.POST("/api/intents/:id/discard", s.discardIntent, s.ability(auth.IntentsManage))
	e.GET("/api/intents/:id/events", s.intentEvents, s.ability(auth.IntentsManage))

	e.GET("/api/events", s.listEvents, s.ability(auth.LicensesRead))

	e.POST("/api/webhook-endpoints", s.createWebhookEndpoint, s.ability(auth.WebhooksManage))
	e.GET("/api/webhook-endpoints", s.listWebhookEndpoints, s.ability(auth.WebhooksManage))
	e.GET("/api/webhook-endpoints/:id", s.showWebhookEndpoint, s.ability(auth.WebhooksManage))
	e.PATCH("/api/webhook-endpoints/:id", s.updateWebhookEndpoint, s.ability(auth.WebhooksManage))
	e.DELETE("/api/webhook-endpoints/:id", s.deleteWebhookEndpoint, s.ability(auth.WebhooksManage))
	e.GET("/api/webhook-endpoints/:id/deliveries", s.listWebhookDeliveries, s.ability(auth.WebhooksManage))
	e.POST("/api/webhook-endpoints/:id/deliveries/:delivery/retry", s.retryWebhookDelivery, s.ability(auth.WebhooksManage))
	e.GET("/api/webhook-deliveries", s.listAllWebhookDeliveries, s.ability(auth.IntentsManage))
	e.POST("/api/webhook-deliveries/:delivery/retry", s.retryWebhookDelivery, s.ability(auth.IntentsManage))

	// The vendor's webhooks: no token; the signature is the authentication,
	// and each event id is applied once (its operation's Do).
	e.POST("/api/webhooks/vendor", s.vendorWebhook)

	e.POST("/api/tokens", s.issueToken, s.ability(auth.TokensManage))
	e.GET("/api/tokens", s.listTokens, s.ability(auth.TokensManage))
	// A static segment wins over :id in Echo's router, whatever the order;
	// :id has DELETE only, and no token id is "events" (a ULID).
	e.GET("/api/tokens/events", s.tokenEvents, s.ability(auth.TokensManage))
	e.DELETE("/api/tokens/:id", s.revokeToken, s.ability(auth.TokensManage))
}

// guarded is the handler of a guarded operation's route: ability's checks
// (admit, the path's ids among them) for need, then one of the consumer's
// write slots (holdWrite, before any record is reserved), then the guard,
// with the principal as the operation's caller; what the guard decided goes
// to the request's log line. key reads the intent's key from the request
// (its error is answered after the token's), bind its input and the
// fields that fingerprint it. A keyed request's record is read in its token
// row's statement (Prefetch), one round trip for a retry's two reads. The
// guard must list op (it panics here otherwise, as routes are built).
func guarded[In any](s *Server, op idempotency.Operation[In], need string,
	key func(c echo.Context, g *idempotency.Guard) (string, error), bind func(c echo.Context, body []byte) (In, []byte, error)) echo.HandlerFunc {
	s.guard.MustServe(op)
	return func(c echo.Context) error {
		k, keyErr := key(c, s.guard)
		var joined auth.TokenRowJoin
		if pre := s.guard.Prefetch(op.Name, k); keyErr == nil && pre != nil { // a nil *Prefetch is not a nil auth.TokenRowJoin
			joined = pre
		}
		p, release, err := s.admit(c, need, joined)
		if err != nil {
			return err
		}
		defer release()
		if keyErr != nil {
			return keyErr
		}
		var body []byte // none: the empty intent
		if c.Request().Body != nil {
			if body, err = io.ReadAll(c.Request().Body); err != nil {
				return fmt.Errorf("%w: %w", idempotency.ErrBodyUnreadable, err)
			}
		}
		pre, _ := joined.(*idempotency.Prefetch)
		resp, decided, err := op.Serve(c.Request().Context(), s.guard, idempotency.Request{
			Caller: idempotency.Caller{ConsumerID: p.ConsumerID, TokenID: p.TokenID, RequestID: RequestID(c)},
			Method: c.Request().Method, Route: c.Path(), Path: c.Request().URL.EscapedPath(), Key: k, Body: body, Prefetch: pre,
		}, func(body []byte) (In, []byte, error) { return bind(c, body) })
		noteIdempotency(c, decided)
		if err != nil {
			return err
		}
		return writeResponse(c, resp)
	}
}

// headerKey is the Idempotency-Key header's key.
func headerKey(c echo.Context, g *idempotency.Guard) (string, error) {
	return g.HeaderKey(c.Request().Header.Values(idempotency.HeaderKey))
}

// licenseID binds a license's route to the license's id, which is its
// whole intent (request.LicenseIntent).
func licenseID(c echo.Context, _ []byte) (string, []byte, error) {
	return c.Param("id"), request.LicenseIntent(c.Param("id")), nil
}

// writeResponse writes a guarded operation's answer.
func writeResponse(c echo.Context, r idempotency.Response) error {
	h := c.Response().Header()
	for name, v := range r.Headers {
		h.Set(name, v)
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	c.Response().WriteHeader(status)
	if len(r.Body) == 0 {
		return nil
	}
	_, err := c.Response().Write(r.Body)
	return err
}

// laravelVerbs is Laravel's Router::$verbs order, the order a 405's Allow
// lists the methods of the path in.
var laravelVerbs = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// laravelRouter answers what Echo's router could not route as Laravel's
// router does. A path no route has is Laravel's NotFoundHttpException from
// RouteCollection::match, 404 {"message":"The route api/x could not be
// found."}, its path as Request::path() gives it. Echo answers 405 for some
// paths no route has (GET /api/tokens/x/y, where /api/tokens/:id takes
// DELETE): a 405 whose path does not match its route's pattern is that 404
// too. A real 405 (the path exists, not for this method) gets Laravel's
// Allow: the path's methods in Router::$verbs order, HEAD wherever GET is
// (Laravel's GET routes match HEAD, as headAsGet makes licensor's), no
// OPTIONS, which no route declares ("GET, HEAD, POST" for /api/licenses).
// A plain OPTIONS (a CORS preflight is answered before) is what Laravel's
// RouteCollection answers it: 200, no body, Allow the same methods joined
// by a bare comma ("GET,HEAD,POST"), where Echo would answer 204.
func laravelRouter(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if allow, ok := c.Get(echo.ContextKeyHeaderAllow).(string); ok && c.Request().Method == http.MethodOptions {
			if !pathMatches(c.Path(), c.Request().URL.Path) {
				return routeNotFound(c)
			}
			c.Response().Header().Set(echo.HeaderAllow, strings.Join(laravelMethods(allow), ","))
			return c.NoContent(http.StatusOK)
		}
		err := next(c)
		h := c.Response().Header()
		if errors.Is(err, echo.ErrMethodNotAllowed) && !pathMatches(c.Path(), c.Request().URL.Path) {
			h.Del(echo.HeaderAllow)
			err = echo.ErrNotFound
		}
		if errors.Is(err, echo.ErrNotFound) {
			return routeNotFound(c)
		}
		if allow := h.Get(echo.HeaderAllow); allow != "" && errors.Is(err, echo.ErrMethodNotAllowed) {
			allow = strings.Join(laravelMethods(allow), ", ")
			h.Set(echo.HeaderAllow, allow)
			// AbstractRouteCollection::requestMethodNotAllowed's message,
			// which Laravel shows in production too (an HttpException's).
			return &Error{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf(
				"The %s method is not supported for route %s. Supported methods: %s.", requestMethod(c), laravelPath(c), allow)}
		}
		return err
	}
}

// routeNotFound is the 404 of a path no route has, in Laravel's words.
func routeNotFound(c echo.Context) *Error {
	return &Error{Status: http.StatusNotFound, Message: "The route " + laravelPath(c) + " could not be found."}
}

// laravelPath is the request's path as Laravel's Request::path() gives it:
// as it was sent, without its slashes at either end, "/" for the root.
func laravelPath(c echo.Context) string {
	path := c.Request().URL.EscapedPath()
	if uri := c.Request().RequestURI; strings.HasPrefix(uri, "/") {
		path, _, _ = strings.Cut(uri, "?") // the path as it was sent, as Laravel's
	}
	if path = strings.Trim(path, "/"); path == "" {
		path = "/"
	}
	return path
}

// pathMatches reports whether path is one of pattern's (Echo's: ":name"
// one segment, "*" the rest).
func pathMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, p := range ps {
		if p == "*" {
			return true
		}
		if i >= len(xs) || (strings.HasPrefix(p, ":") && xs[i] == "") || (!strings.HasPrefix(p, ":") && p != xs[i]) {
			return false
		}
	}
	return len(ps) == len(xs)
}

// laravelMethods are the methods of allow (Echo's Allow) as Laravel lists
// a path's methods: in Router::$verbs order, HEAD wherever GET is, no
// OPTIONS.
func laravelMethods(allow string) []string {
	has := map[string]bool{}
	for _, m := range strings.Split(allow, ",") {
		has[strings.TrimSpace(m)] = true
	}
	has[http.MethodHead] = has[http.MethodGet]
	var out []string
	for _, m := range laravelVerbs {
		if has[m] {
			out = append(out, m)
		}
	}
	return out
}
