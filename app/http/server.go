// Package http is licensor's HTTP layer: the Echo server, its routes, the
// middleware every request passes through, and the one place where errors
// become status codes and Laravel-shaped JSON bodies.
package http

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/metrics"
	"github.com/licensor-api/licensor/app/operations"
	"github.com/licensor-api/licensor/app/ratelimit"
	"github.com/licensor-api/licensor/app/webhooks"
)

// Deps is everything the HTTP layer needs; main fills it in.
type Deps struct {
	// Ready proves the database takes a write (a probe row written and
	// deleted: database.ProbeWrite), for /readyz.
	Ready    func(ctx context.Context) error
	Log      *slog.Logger
	MaxBody  int64 // request body limit in bytes
	Auth     *auth.Service
	Licenses *licenses.Service
	// Guard runs the guarded operations; Operations are the ones the routes
	// serve, declared in app/operations and listed in the Guard.
	Guard      *idempotency.Guard
	Operations operations.Set
	// Intents is the idempotency store, for the intents' views.
	Intents *idempotency.Store
	// Events is the consumer events, for the feed (GET /api/events).
	Events *events.Log
	// Webhooks manages the consumers' webhook endpoints and shows their
	// deliveries.
	Webhooks *webhooks.Service
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// WebhookSecrets verify the vendor's webhooks (VENDOR_WEBHOOK_SECRET);
	// none: every webhook is refused.
	WebhookSecrets []string
	// Metrics are counted here and served at /metrics, unless
	// MetricsElsewhere keeps them off the API's address: serve has them on
	// METRICS_ADDR, or (production without it) nowhere. Required.
	Metrics          *metrics.Metrics
	MetricsElsewhere bool
	// RateLimit counts every authenticated request per consumer (nil: no
	// limit, like a limiter that is off).
	RateLimit *ratelimit.Limiter
	// Concurrency bounds each consumer's writes in flight on this server
	// (CONSUMER_CONCURRENCY; nil: no bound).
	Concurrency *ratelimit.Concurrency
	// CORSOrigins are the origins a browser may call api/* from
	// (CORS_ALLOWED_ORIGINS); none or "*": any.
	CORSOrigins []string
	// URL is the application's base URL (APP_URL): the absolute links of a
	// paginated listing start with it.
	URL string
	// Pages are served beside the API (the operator console); nil: none.
	Pages Pages
	// TrustedProxies are the proxies whose X-Forwarded-For names a
	// request's client (TRUSTED_PROXIES); none: the connection's peer.
	TrustedProxies []netip.Prefix
}

// Pages is a browser interface served beside the API under paths of its
// own: its routes are its own, and its errors, mapped to a status and a
// message here like every other error, are written as pages.
type Pages interface {
	// Mount adds the pages' routes to e. signedIn is the hook the pages call
	// with the principal of a request they authenticated, so that its access
	// line names the token, as an API request's does.
	Mount(e *echo.Echo, signedIn func(c echo.Context, p auth.Principal))
	// Owns reports whether a request path is one of the pages'.
	Owns(path string) bool
	// RenderError writes the page of an error.
	RenderError(c echo.Context, status int, message string) error
}

// Server holds the dependencies the handlers use: Deps' (see there).
type Server struct {
	ready    func(ctx context.Context) error
	log      *slog.Logger
	auth     *auth.Service
	licenses *licenses.Service
	guard    *idempotency.Guard
	ops      operations.Set
	store    *idempotency.Store
	events   *events.Log
	webhooks *webhooks.Service
	now      func() time.Time
	metrics  *metrics.Metrics
	limiter  *ratelimit.Limiter
	inFlight *ratelimit.Concurrency
	baseURL  string // APP_URL without a trailing slash
	// webhookSecrets verify the vendor's webhooks.
	webhookSecrets []string
	pages          Pages
	// keyWarning tells, once a minute at most, why requests answer 503
	// key_unavailable (see errors.go).
	keyWarning keyWarning
}

// NewServer builds the Echo instance that serve runs and that the tests drive.
func NewServer(d Deps) *echo.Echo {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Server{ready: d.Ready, log: d.Log, auth: d.Auth, licenses: d.Licenses, metrics: d.Metrics, limiter: d.RateLimit, inFlight: d.Concurrency,
		guard: d.Guard, ops: d.Operations, store: d.Intents, events: d.Events, webhooks: d.Webhooks, now: d.Now,
		baseURL: strings.TrimRight(d.URL, "/"), webhookSecrets: d.WebhookSecrets, pages: d.Pages}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = clientIP(d.TrustedProxies)
	e.HTTPErrorHandler = s.handleError
	e.JSONSerializer = jsonSerializer{}
	// Laravel's router matches a path with or without its trailing slash
	// (Request::path() trims it): so does licensor, the path rewritten
	// before routing, no redirect.
	e.Pre(trimTrailingSlash, headAsGet)
	e.Use(requestID, cacheControl, s.accessLog, s.recoverPanic, newCORS(d.CORSOrigins).middleware, bodyLimit(d.MaxBody), laravelRouter, s.formBodies)
	s.routes(e)
	if d.Pages != nil {
		d.Pages.Mount(e, func(c echo.Context, p auth.Principal) { c.Set(ctxPrincipal, p) })
	}
	if !d.MetricsElsewhere {
		e.GET("/metrics", echo.WrapHandler(d.Metrics.Handler()))
	}
	return e
}
