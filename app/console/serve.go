package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/metrics"
	"github.com/licensor-api/licensor/config"
)

// serve runs the HTTP API until ctx is cancelled, then shuts down gracefully;
// the background work stops with it and is waited for (a webhook attempt in
// flight for at most WEBHOOK_TIMEOUT).
func serve(ctx context.Context, e env) error {
	const summary = "Serves the API on APP_ADDR; every setting comes from the environment (see .env.example)."
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	vendorChange := fs.Bool("vendor-change", false, vendorChangeUsage)
	if ok, err := flagsOnly(fs, e, "serve [--vendor-change]", summary); !ok {
		return err
	}
	a, ln, err := serveApp(ctx, e, *vendorChange)
	if err != nil {
		return err
	}
	defer ln.Close() // Serve closes it; this covers a return before it
	defer func() {
		if err := a.Close(); err != nil {
			a.Log.Error("close", "error", err)
		}
	}()
	cfg, log := a.Config, a.Log
	gogc := tuneGC(e.getenv)
	srv := httpServer(cfg, a.Server())
	rateLimit := []any{"rate_limit_per_minute", cfg.RateLimitPerMinute}
	if cfg.RateLimitPerMinute > 0 {
		rateLimit = append(rateLimit, "rate_limit_store", cfg.RateLimitStore)
		if cfg.RateLimitStore == config.RateLimitRedis {
			rateLimit = append(rateLimit, "redis", config.RedactRedisURL(cfg.RedisURL))
		}
	}
	rateLimit = append(rateLimit, "consumer_concurrency", cfg.ConsumerConcurrency) // 0: off
	log.Info("licensor serving", append([]any{
		"addr", "http://" + ln.Addr().String(),
		"env", cfg.Env,
		"database", cfg.DB.Redacted(),
		"vendor_driver", cfg.Vendor.Driver,
		"app_key", cfg.KeySource,
		"work_budget", idempotency.WorkBudget(cfg.Idempotency.LockTimeout).String(),
		"gogc", gogc},
		rateLimit...)...,
	)
	if v := readBuildVersion(); v.KnownVulnerable() {
		log.Warn("built with a Go that has known standard-library vulnerabilities: rebuild with the toolchain go.mod names (GOTOOLCHAIN=go1.27.3 go build)",
			"go", v.Go)
	}
	var background sync.WaitGroup
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer func() { stopBackground(); background.Wait() }()
	background.Go(func() { a.Reconciler.Run(bgCtx) })
	background.Go(func() { a.Pruner.Run(bgCtx) })
	background.Go(func() { a.Webhooks.Run(bgCtx) })
	background.Go(func() { a.Auth.RunTouchWriter(bgCtx) })
	background.Go(func() { a.Activity.Run(bgCtx) })
	// The fake does not compare licenses the http driver made: it knows none of their sites.
	if lister, ok := a.Vendor.(licenses.SiteLister); ok && cfg.DriftEvery > 0 && !a.madeByHTTP() {
		background.Go(func() { runDrift(bgCtx, a, lister, cfg.DriftEvery, log) })
	}
	switch {
	case cfg.MetricsAddr != "":
		if err := serveMetrics(bgCtx, &background, cfg.MetricsAddr, a.Metrics, log); err != nil {
			return err
		}
	case !cfg.MetricsOnAPI():
		log.Warn("metrics not served over HTTP: production serves /metrics on METRICS_ADDR only, and it is unset " +
			"(set it to an address only Prometheus reaches, e.g. 0.0.0.0:9100)")
	}
	if cfg.PprofAddr != "" {
		if err := serveProfiles(bgCtx, &background, cfg.PprofAddr, log); err != nil {
			return err
		}
	}
	return serveUntilDone(ctx, srv, ln, cfg.ShutdownTimeout, log)
}

// serveApp is loadApp for serve: it takes APP_ADDR first, so that a busy port
// fails without touching the database, and may create the SQLite database
// (`go run .` on a fresh checkout).
func serveApp(ctx context.Context, e env, vendorChange bool) (*App, net.Listener, error) {
	cfg, log, err := loadConfig(e)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on APP_ADDR %s: %w", cfg.Addr, err)
	}
	a, err := Bootstrap(ctx, cfg, log, Overrides{})
	if err == nil {
		err = a.bindVendor(ctx, vendorChange) // closes a when it refuses
	}
	if err != nil {
		return nil, nil, errors.Join(err, ln.Close())
	}
	return a, ln, nil
}

// serveGCPercent is the garbage collector's target (GOGC) serve runs with
// when the environment sets none. A request leaves little that lives on,
// so the heap stays small and the default target (100) collects it very
// often: in the benchmark a replay spent a fifth of its CPU on the
// collector. 400 collects a quarter as often, for a larger heap
// (docs/performance.md measures both); GOMEMLIMIT still bounds it.
const serveGCPercent = 400

// tuneGC sets serveGCPercent unless GOGC is set (the runtime applied it at
// start, and it stands), and returns the GOGC in force.
func tuneGC(getenv func(string) string) string {
	if v := getenv("GOGC"); v != "" {
		return v
	}
	debug.SetGCPercent(serveGCPercent)
	return strconv.Itoa(serveGCPercent)
}

// httpServer is the API's server, with a timeout on every phase: a client
// trickling its request cannot hold a connection, and a create still has
// its whole work budget before its response must be written.
func httpServer(cfg config.Config, h http.Handler) *http.Server {
	write := cfg.WriteTimeout
	if write == 0 {
		// Reading the body, then the work, then settling, all within a lease.
		write = cfg.ReadTimeout + cfg.Idempotency.LockTimeout + 5*time.Second
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(cfg.ReadTimeout, 10*time.Second),
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      write,
		IdleTimeout:       cfg.IdleTimeout,
	}
}

// serveUntilDone serves until ctx ends, then lets the requests in flight finish
// within grace.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", grace.String())
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

func serveMetrics(ctx context.Context, wg *sync.WaitGroup, addr string, m *metrics.Metrics, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return serveAside(ctx, wg, "METRICS_ADDR", addr, "/metrics", mux, log)
}

// serveProfiles serves Go's profiles on PPROF_ADDR: never on the API's
// address, never on a public one.
func serveProfiles(ctx context.Context, wg *sync.WaitGroup, addr string, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return serveAside(ctx, wg, "PPROF_ADDR", addr, "/debug/pprof/", mux, log)
}

// serveAside serves h on addr (the setting named variable) until ctx ends.
func serveAside(ctx context.Context, wg *sync.WaitGroup, variable, addr, path string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s %s: %w", variable, addr, err)
	}
	// No WriteTimeout: a CPU profile streams for the seconds it was asked for.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving "+path+" aside", "addr", "http://"+ln.Addr().String()+path)
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("listener", "variable", variable, "error", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		if err := srv.Close(); err != nil {
			log.Error("close listener", "variable", variable, "error", err)
		}
	})
	return nil
}

// runDrift compares the vendor's sites with the licenses every interval (the
// first one interval after start), and logs and counts each mismatch.
func runDrift(ctx context.Context, a *App, lister licenses.SiteLister, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		report, err := a.Licenses.Drift(ctx, lister, false)
		if err != nil {
			log.Warn("drift check failed", "error", err)
			continue
		}
		for _, m := range report.Mismatches {
			log.Warn("drift", "kind", m.Kind, "license_id", m.LicenseID, "site_id", m.SiteID, "domain", m.Domain)
		}
		a.Metrics.ObserveDrift(report.Counts())
		recordDrift(ctx, a, report)
		log.Info("drift checked", "sites", report.Sites, "licenses", report.Licenses, "mismatches", len(report.Mismatches))
	}
}
