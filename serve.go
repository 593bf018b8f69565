package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/auth"
	apphttp "github.com/licensor-api/licensor/app/http"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// serve runs the HTTP API until ctx is cancelled, then shuts down gracefully.
func serve(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: licensor serve\n\nServes the API on APP_ADDR; every setting comes from the environment (see .env.example).")
	}
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	a, err := openApp(ctx, e)
	if err != nil {
		return err
	}
	defer a.close()
	cfg, log := a.cfg, a.log
	handler := apphttp.NewServer(apphttp.Deps{
		DB:               a.db,
		Log:              log,
		MaxBody:          cfg.MaxBody,
		Auth:             auth.NewService(a.db, cfg.Key, cfg.URL, cfg.TokenTTL, log, nil),
		Licenses:         a.licenses,
		Metrics:          a.metrics,
		MetricsElsewhere: cfg.MetricsAddr != "",
		Idempotency: idempotency.Config{
			Store:       a.store,
			TTL:         cfg.Idempotency.TTL,
			LockTimeout: cfg.Idempotency.LockTimeout,
			Required:    cfg.Idempotency.Required,
			Log:         log,
		},
	})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on APP_ADDR %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Info("licensor serving",
		"addr", "http://"+ln.Addr().String(),
		"env", cfg.Env,
		"database", cfg.DB.Redacted(),
		"vendor_driver", cfg.Vendor.Driver,
		"app_key", cfg.KeySource,
	)
	var background sync.WaitGroup
	bgCtx, stopBackground := context.WithCancel(ctx)
	defer func() { stopBackground(); background.Wait() }()
	background.Go(func() { a.reconciler().Run(bgCtx, cfg.Reconcile.Interval) })
	background.Go(func() { a.pruner().Run(bgCtx, cfg.PruneEvery) })
	if cfg.MetricsAddr != "" {
		if err := serveMetrics(bgCtx, &background, cfg.MetricsAddr, a.metrics, log); err != nil {
			return err
		}
	}
	return serveUntilDone(ctx, srv, ln, cfg.ShutdownTimeout, log)
}

// serveUntilDone serves until ctx ends, then stops accepting and lets the
// requests in flight finish within grace (APP_SHUTDOWN_TIMEOUT for serve).
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

// openMigrated opens the database. SQLite is migrated in place; a MySQL
// schema is only checked, since replicas must never race to migrate it.
func openMigrated(ctx context.Context, cfg config.Config, log *slog.Logger) (*gorm.DB, error) {
	db, err := database.Open(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	m, err := database.NewMigrator(db)
	if err == nil {
		if cfg.DB.Connection == database.SQLite {
			var n int
			if n, err = migrateSQLite(ctx, m); n > 0 {
				log.Info("migrated", "database", cfg.DB.Redacted(), "applied", n)
			}
		} else {
			err = m.CheckCurrent(ctx)
		}
	}
	if err != nil {
		closeDB(db)
		return nil, err
	}
	return db, nil
}

// migrateSQLite applies the migrations to an embedded database. Two
// processes started at once on a fresh file (serve and a token command, say)
// both try; the loser's migration fails on a table the winner made, so it
// waits and looks again rather than giving up.
func migrateSQLite(ctx context.Context, m *database.Migrator) (int, error) {
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		var n int
		if n, err = m.Up(ctx); err == nil {
			return n, nil
		}
		if m.CheckCurrent(ctx) == nil {
			return 0, nil // the other process finished the job
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
	return 0, err
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close()
	}
}

// operationTimeout bounds one business operation: 80 % of the idempotency
// lease, so that its owner always settles before anyone may take it over.
func operationTimeout(cfg config.Config) time.Duration {
	return cfg.Idempotency.LockTimeout * 4 / 5
}

// serveMetrics serves /metrics on its own address (METRICS_ADDR) until ctx ends.
func serveMetrics(ctx context.Context, wg *sync.WaitGroup, addr string, m *apphttp.Metrics, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on METRICS_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("metrics serving", "addr", "http://"+ln.Addr().String()+"/metrics")
	wg.Go(func() { _ = srv.Serve(ln) })
	wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
	return nil
}
