// Package http is licensor's HTTP layer: the Echo server, its routes, the
// middleware every request passes through, and the one place where errors
// become status codes and Laravel-shaped JSON bodies.
package http

import (
	"log/slog"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/metrics"
	"github.com/licensor-api/licensor/app/ratelimit"
)

// Deps is everything the HTTP layer needs; main fills it in.
type Deps struct {
	DB       *gorm.DB
	Log      *slog.Logger
	MaxBody  int64 // request body limit in bytes
	Auth     *auth.Service
	Licenses *licenses.Service
	// Idempotency guards write routes; its Consumer, RequestID and Observe
	// are filled in by NewServer.
	Idempotency idempotency.Config
	// WebhookSecrets verify the vendor's webhooks (VENDOR_WEBHOOK_SECRET);
	// none: every webhook is refused.
	WebhookSecrets []string
	// Metrics are counted here and served at /metrics (nil: a fresh set),
	// unless MetricsElsewhere says main serves them on METRICS_ADDR.
	Metrics          *metrics.Metrics
	MetricsElsewhere bool
	// RateLimit counts every authenticated request per consumer (nil: no
	// limit, like a limiter that is off).
	RateLimit *ratelimit.Limiter
	// URL is the application's base URL (APP_URL): the absolute links of a
	// paginated listing start with it.
	URL string
}

// Server holds the dependencies the handlers use.
type Server struct {
	db       *gorm.DB
	log      *slog.Logger
	auth     *auth.Service
	licenses *licenses.Service
	idem     *idempotency.Guard
	store    *idempotency.Store
	now      func() time.Time
	metrics  *metrics.Metrics
	limiter  *ratelimit.Limiter
	baseURL  string // APP_URL without a trailing slash
	// webhookSecrets verify the vendor's webhooks (VENDOR_WEBHOOK_SECRET).
	webhookSecrets []string
}

// NewServer builds the Echo instance that serve runs and that the tests drive.
func NewServer(d Deps) *echo.Echo {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Metrics == nil {
		d.Metrics = metrics.New([]string{"licenses.store"}, nil)
	}
	s := &Server{db: d.DB, log: d.Log, auth: d.Auth, licenses: d.Licenses, metrics: d.Metrics, limiter: d.RateLimit,
		baseURL: strings.TrimRight(d.URL, "/"), webhookSecrets: d.WebhookSecrets}
	s.store, s.now = d.Idempotency.Store, d.Idempotency.Now
	if s.now == nil {
		s.now = time.Now
	}
	d.Idempotency.Consumer = func(c echo.Context) string { return principal(c).ConsumerID }
	d.Idempotency.Requester = func(c echo.Context) string { return principal(c).TokenID }
	d.Idempotency.RequestID = RequestID
	if d.Idempotency.Log == nil {
		d.Idempotency.Log = d.Log
	}
	if d.Idempotency.Observe == nil {
		d.Idempotency.Observe = d.Metrics.ObserveIdempotency
	}
	s.idem = idempotency.New(d.Idempotency)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.JSONSerializer = jsonSerializer{}
	e.Use(requestID, s.accessLog, s.recoverPanic, bodyLimit(d.MaxBody))
	s.routes(e)
	if !d.MetricsElsewhere {
		e.GET("/metrics", echo.WrapHandler(d.Metrics.Handler()))
	}
	return e
}
