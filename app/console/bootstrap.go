package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/activity"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/events"
	apphttp "github.com/licensor-api/licensor/app/http"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/metrics"
	"github.com/licensor-api/licensor/app/operations"
	"github.com/licensor-api/licensor/app/ratelimit"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/app/vendorsim"
	"github.com/licensor-api/licensor/app/web"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// This file is the one place the application is wired: `licensor` and the
// tests both build it here, so that a wiring change in production is a
// wiring change in every test.

// Overrides replace the parts of the application a test must control. The
// zero value is production.
type Overrides struct {
	DB            *gorm.DB                   // an open, migrated database instead of cfg.DB's; not closed by the application
	Read          *gorm.DB                   // the read pool beside DB (nil: DB); not closed by the application
	Vendor        licenses.Vendor            // replaces the driver cfg.Vendor names
	VendorOptions []vendorclient.Option      // added to the configured driver's (a test's sleep)
	Now           func() time.Time           // every service's clock (nil: time.Now)
	Log           *slog.Logger               // replaces the one built from cfg
	Operations    []idempotency.AnyOperation // declared beside the application's own (a test's)
	Outbox        licenses.Outbox            // replaces the events' outbox (a benchmark's: what the event costs)
	// Jitter replaces the random jitter of the reconciler's and the webhook
	// deliveries' backoffs (a deterministic simulation's: the same seed,
	// the same schedule).
	Jitter func(max time.Duration) time.Duration
	// WebhookTransport carries the webhook deliveries instead of the
	// network (a deterministic simulation's endpoints, in process).
	WebhookTransport http.RoundTripper
}

// Base is what every command that touches the database shares. It builds no
// vendor driver and no HTTP server, so the token commands work without either.
type Base struct {
	Config   config.Config
	Log      *slog.Logger
	DB       *gorm.DB // writes, and the reads inside them
	Read     *gorm.DB // the hot reads: SQLite's read-only pool; DB on MySQL
	Metrics  *metrics.Metrics
	Activity *activity.Recorder // the hourly counters of the console's charts: serve flushes them, Close too
	Auth     *auth.Service
	Store    *idempotency.Store
	Pruner   *idempotency.Pruner
	Cipher   *crypt.Cipher // secrets at rest: sealed under APP_KEY, opened under it or APP_PREVIOUS_KEYS
	Events   *events.Log   // the consumer events: the outbox every license change writes to
	Webhooks *webhooks.Service
	now      func() time.Time
	jitter   func(max time.Duration) time.Duration // the reconciler's (nil: random)
	ownsDB   bool
	ownsRead bool
	group    *database.GroupCommit // SQLite's batched request writes; nil on MySQL
}

// OpenBase opens the database (migrating SQLite, refusing a MySQL schema
// that is behind) and builds the services that need nothing else.
func OpenBase(ctx context.Context, cfg config.Config, log *slog.Logger, o Overrides) (*Base, error) {
	if o.Log != nil {
		log = o.Log
	}
	b := &Base{Log: log, DB: o.DB, now: o.Now, jitter: o.Jitter}
	if b.now == nil {
		b.now = time.Now
	}
	if b.DB == nil {
		db, err := database.OpenMigrated(ctx, cfg.DB, log)
		if err != nil {
			return nil, unknownMySQLDatabase(cfg.DB, err)
		}
		b.DB, b.ownsDB = db, true
		read, err := database.OpenReader(ctx, cfg.DB, db)
		if err != nil {
			return nil, errors.Join(err, database.Close(db))
		}
		b.Read, b.ownsRead = read, read != db
	} else {
		b.Read = o.Read
	}
	if b.Read == nil {
		b.Read = b.DB
	}
	// The local key file is made once the database is there, so that a
	// command refused for want of one leaves nothing behind.
	err := cfg.CreateKey()
	if err == nil {
		b.Cipher, err = crypt.New(cfg.Key, cfg.PreviousKeys...)
	}
	if err != nil {
		return nil, errors.Join(err, b.closeDB())
	}
	b.Config = cfg
	if b.DB.Dialector.Name() == database.SQLite {
		// One writer: the reservations and settlements of concurrent requests
		// share commits (MySQL groups its log flushes itself).
		b.group = database.NewGroupCommit(b.DB, 0)
	}
	b.Store = idempotency.NewStore(b.DB, b.Cipher, b.Read, b.group)
	b.Events = events.New(b.DB, b.Read, b.Cipher)
	b.Metrics = metrics.New(nil, intentStats(b.Store)) // the operations' labels come with them (app)
	for _, c := range vendorproto.Calls {
		b.Metrics.DeclareVendorCall(c.Name, c.OK)
	}
	b.Activity = activity.New(activity.Config{DB: b.DB, Read: b.Read, Now: b.now, Log: log, Retry: database.RetryOnConflict})
	b.Webhooks = webhooks.New(webhooks.Config{
		DB: b.DB, Read: b.Read, Events: b.Events, Cipher: b.Cipher,
		Policy: webhooks.Policy{AllowPrivate: cfg.Webhooks.AllowPrivate, PrivateAllowlist: cfg.Webhooks.PrivateAllowlist,
			RequireHTTPS: cfg.Webhooks.RequireHTTPS},
		Timeout: cfg.Webhooks.Timeout, RetryBase: cfg.Webhooks.RetryBase, RetryFor: cfg.Webhooks.RetryFor,
		Interval: cfg.Webhooks.PollInterval, EndpointConcurrency: cfg.Webhooks.EndpointConcurrency, UserAgent: readBuildVersion().UserAgent(),
		Retry: database.RetryOnConflict, Now: b.now, Log: log, Observe: b.Metrics.ObserveWebhook,
		Transport: o.WebhookTransport, Jitter: o.Jitter,
	})
	b.Metrics.ReadWebhooks(webhookStats(b.Webhooks))
	b.Auth = auth.New(auth.Config{
		DB: b.DB, Read: b.Read, Key: cfg.Key, PreviousKeys: cfg.PreviousKeys, Issuer: cfg.Issuer,
		DefaultTTL: cfg.TokenTTL, MaxTTL: cfg.TokenMaxTTL, Log: log, Now: b.now,
	})
	b.Pruner = idempotency.NewPruner(idempotency.PrunerConfig{
		Store: b.Store, Interval: cfg.PruneEvery, Log: log, Now: b.now, Observe: b.Metrics.ObservePruned,
		Also: map[string]func(ctx context.Context, now time.Time) (int64, error){
			prunedEvents: func(ctx context.Context, now time.Time) (int64, error) {
				return b.Webhooks.Prune(ctx, now.Add(-cfg.EventsTTL), 0)
			},
			prunedActivity: func(ctx context.Context, now time.Time) (int64, error) {
				return b.Activity.Prune(ctx, now.Add(-activityTTL))
			},
		},
	})
	return b, nil
}

// Close flushes what the token service and the activity counters still
// hold and closes the database if the Base opened it. The counters' flush
// failing is logged, not returned: they are chart data.
func (b *Base) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.Auth.Flush(ctx)
	if ferr := b.Activity.Flush(ctx); ferr != nil {
		b.Log.Warn("activity flush failed on close: its counts are lost", "error", ferr)
	}
	if b.group != nil {
		b.group.Close()
	}
	return errors.Join(err, b.closeDB())
}

func (b *Base) closeDB() error {
	var err error
	if b.ownsRead {
		err = database.Close(b.Read)
	}
	if b.ownsDB {
		err = errors.Join(err, database.Close(b.DB))
	}
	return err
}

// App is the whole application: the Base, the vendor driver and the services
// on it.
type App struct {
	*Base
	Vendor     licenses.Vendor
	Licenses   *licenses.Service
	Operations operations.Set
	Guard      *idempotency.Guard
	Reconciler *idempotency.Reconciler
	Limiter    *ratelimit.Limiter // per consumer, in RATE_LIMIT_STORE; Close closes its Redis client
	// Concurrency bounds each consumer's writes in flight in this process,
	// shared by every server built on the App.
	Concurrency *ratelimit.Concurrency
	// VendorKind is the vendor the database works with, once a command
	// has bound it (bindVendor); zero for an App built by a test.
	VendorKind    database.VendorKind
	reconcilerCfg idempotency.ReconcilerConfig // what Reconciler was built from
}

// Close closes the rate limiter's store, then the Base.
func (a *App) Close() error {
	var err error
	if a.Limiter != nil {
		err = a.Limiter.Close()
	}
	return errors.Join(err, a.Base.Close())
}

// Bootstrap builds the application from the configuration; Server builds the
// HTTP API on it. log is the logger cfg asked for (NewLogger).
func Bootstrap(ctx context.Context, cfg config.Config, log *slog.Logger, o Overrides) (*App, error) {
	b, err := OpenBase(ctx, cfg, log, o)
	if err != nil {
		return nil, err
	}
	vendor := o.Vendor
	if vendor == nil {
		opts := append([]vendorclient.Option{
			vendorclient.WithObserver(b.Metrics.ObserveVendor, b.Metrics.ObserveVendorRetry),
			vendorclient.WithUserAgent(readBuildVersion().UserAgent()), // what `licensor version` prints
		}, o.VendorOptions...)
		if vendor, err = newVendor(cfg.Vendor, b.Log, opts...); err != nil {
			return nil, errors.Join(err, b.Close())
		}
	}
	a, err := b.app(vendor, o.Operations, o.Outbox)
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return a, nil
}

// newVendor builds the driver VENDOR_DRIVER names: "fake" (the default) is the
// http driver on a simulator in this process, so the demos' vendor speaks the
// real protocol, but keeps its sites in memory.
func newVendor(cfg config.Vendor, log *slog.Logger, opts ...vendorclient.Option) (licenses.Vendor, error) {
	switch cfg.Driver {
	case "", "fake":
		log.Warn("vendor driver is the in-memory fake: sites vanish with the process; for demos only, set VENDOR_DRIVER=http for real use")
		sim, err := vendorsim.NewSimulator(vendorsim.SimOptions{})
		if err != nil {
			return nil, err
		}
		return vendorclient.NewInProcess(sim, cfg, log, opts...), nil
	case "http":
		d, err := vendorclient.NewHTTP(cfg, log, opts...)
		if err != nil {
			return nil, err // not a nil *HTTPDriver inside a non-nil interface
		}
		return d, nil
	}
	return nil, fmt.Errorf("VENDOR_DRIVER %q is not fake or http", cfg.Driver)
}

// app builds the services on the vendor: the guard and the reconciler share one
// list of operations, and one that cannot be resumed stops the start here.
func (b *Base) app(vendor licenses.Vendor, extra []idempotency.AnyOperation, outbox licenses.Outbox) (*App, error) {
	cfg := b.Config
	a := &App{Base: b, Vendor: vendor}
	if outbox == nil {
		outbox = b.Events
	}
	a.Licenses = licenses.New(licenses.Config{DB: b.DB, Read: b.Read, Vendor: vendor, Cipher: b.Cipher, Now: b.now,
		Retry: database.RetryOnConflict, Log: b.Log, ObserveSiteMismatch: b.Metrics.ObserveSiteMismatch, Events: outbox,
		// Creates are counted where a license is made, whatever asked for
		// it (see activity.Creates), not from the guard's outcomes.
		ObserveCreated: func() { b.Activity.Add(activity.Creates, 1) }})
	a.Operations = operations.New(a.Licenses)
	ops, err := idempotency.NewOperations(append(a.Operations.List(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("declare operations: %w", err)
	}
	b.Metrics.DeclareOperations(ops.Names())
	if a.Guard, err = idempotency.New(idempotency.Config{
		Store:       b.Store,
		TTL:         cfg.Idempotency.TTL,
		LockTimeout: cfg.Idempotency.LockTimeout,
		Required:    cfg.Idempotency.Required,
		Operations:  ops,
		Log:         b.Log,
		Now:         b.now,
		Observe:     b.observeIdempotency,
		ReplayCache: cfg.Idempotency.ReplayCache,
	}); err != nil {
		return nil, err
	}
	if a.Limiter, err = b.rateLimiter(); err != nil {
		return nil, err
	}
	a.Concurrency = ratelimit.NewConcurrency(cfg.ConsumerConcurrency)
	a.reconcilerCfg = idempotency.ReconcilerConfig{
		Store:          b.Store,
		Operations:     ops,
		Settle:         cfg.Reconcile.Settle,
		MaxAttempts:    cfg.Reconcile.MaxAttempts,
		FailedInterval: cfg.Reconcile.FailedEvery,
		Lease:          cfg.Idempotency.LockTimeout,
		TTL:            cfg.Idempotency.TTL,
		Backoff:        cfg.Reconcile.Interval,
		Interval:       cfg.Reconcile.Interval,
		Log:            b.Log,
		Now:            b.now,
		Observe:        b.Metrics.ObserveReconcile,
		Jitter:         b.jitter,
		// The vendor deletes owed for sites nobody holds, whose first try failed.
		Sweep: func(ctx context.Context) error {
			_, err := a.Licenses.DeleteOwedSites(ctx, 100)
			return err
		},
	}
	a.Reconciler = idempotency.NewReconciler(a.reconcilerCfg)
	return a, nil
}

// Server is the HTTP API: the handler serve runs and the tests drive.
func (a *App) Server() *echo.Echo {
	cfg := a.Config
	return apphttp.NewServer(apphttp.Deps{
		Ready:            database.NewReadiness(a.DB, a.now).Check,
		Log:              a.Log,
		MaxBody:          cfg.MaxBody,
		Auth:             a.Auth,
		Licenses:         a.Licenses,
		Guard:            a.Guard,
		Operations:       a.Operations,
		Intents:          a.Store,
		Events:           a.Events,
		Webhooks:         a.Webhooks,
		Now:              a.now,
		Metrics:          a.Metrics,
		MetricsElsewhere: !cfg.MetricsOnAPI(),
		RateLimit:        a.Limiter,
		Concurrency:      a.Concurrency,
		URL:              cfg.URL,
		CORSOrigins:      cfg.CORSAllowedOrigins,
		TrustedProxies:   cfg.TrustedProxies,
		WebhookSecrets:   cfg.Vendor.WebhookSecrets,
		Pages:            a.consolePages(),
	})
}

// consolePages is the operator console served under /console, or nil when
// CONSOLE_ENABLED is false.
func (a *App) consolePages() apphttp.Pages {
	cfg := a.Config
	if cfg.Console.Disabled {
		return nil
	}
	return web.New(web.Config{
		Auth: a.Auth, Intents: a.Store, Operations: a.Guard.Operations(), Guard: a.Guard, Licenses: a.Licenses, Events: a.Events, Webhooks: a.Webhooks,
		Activity: a.Activity, Guarded: a.Operations,
		Key: cfg.Key, Secure: cfg.Console.SecureCookie,
		SessionTTL: cfg.Console.SessionTTL, LoginsPerMinute: cfg.Console.LoginsPerMinute,
		Now: a.now, Log: a.Log, Version: readBuildVersion().Version,
	})
}

// rateLimiter counts RATE_LIMIT_PER_MINUTE per consumer in RATE_LIMIT_STORE; a
// hand-made configuration that names no store gets config.Load's default.
func (b *Base) rateLimiter() (*ratelimit.Limiter, error) {
	cfg := b.Config
	store := cfg.RateLimitStore
	if store == "" {
		store = config.DefaultRateLimitStore(b.DB.Dialector.Name(), cfg.RedisURL)
	}
	l, err := ratelimit.New(ratelimit.Config{
		PerMinute:      cfg.RateLimitPerMinute,
		Store:          store, // config's names are ratelimit's
		DB:             b.DB,
		Retry:          database.RetryOnConflict,
		Unavailable:    database.IsUnreachable,
		RedisURL:       cfg.RedisURL,
		Batch:          cfg.RateLimitBatch,
		RedisTimeout:   cfg.RedisTimeout, // zero (a hand-made Config): the default
		FallbackShare:  cfg.RateLimitFallbackShare,
		CountedLocally: b.Metrics.ObserveRateLimitLocal,
		Degraded:       b.Metrics.SetRateLimitDegraded,
		Log:            b.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("config: RATE_LIMIT_STORE=%s, REDIS_URL %s: %w", store, config.RedactRedisURL(cfg.RedisURL), err)
	}
	return l, nil
}

func intentStats(store *idempotency.Store) metrics.IntentStats {
	return func(ctx context.Context) (metrics.IntentCounts, error) {
		var c metrics.IntentCounts
		var err error
		c.Pending, c.OldestPending, c.Failed, err = store.Backlog(ctx)
		return c, err
	}
}

// The names of the prunes beside the idempotency records'.
const (
	prunedEvents   = "consumer events"
	prunedActivity = "activity hours"
)

// activityTTL is how long the activity counters' hours are kept: the
// console charts the last day; a week leaves room to look back.
const activityTTL = 7 * 24 * time.Hour

func (b *Base) observeIdempotency(operation, outcome string) {
	b.Metrics.ObserveIdempotency(operation, outcome)
	b.Activity.ObserveIdempotency(operation, outcome)
}

func webhookStats(hooks *webhooks.Service) metrics.WebhookStats {
	return func(ctx context.Context) (metrics.WebhookCounts, error) {
		var c metrics.WebhookCounts
		var err error
		c.OldestPending, c.Disabled, err = hooks.Stats(ctx)
		return c, err
	}
}

// NewLogger is the logger the configuration asks for, writing to w.
func NewLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo // config.Load has validated it; a hand-made Config may leave it empty
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
