package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	apphttp "github.com/licensor-api/licensor/app/http"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
)

// app is what serve and the one-shot commands share: the database, the
// vendor and the services built on them.
type app struct {
	cfg      config.Config
	log      *slog.Logger
	db       *gorm.DB
	store    *idempotency.Store
	licenses *licenses.Service
	metrics  *apphttp.Metrics
}

// openApp loads the configuration, opens the (migrated) database and builds
// the services.
func openApp(ctx context.Context, e env) (*app, error) {
	cfg, log, err := loadConfig(e)
	if err != nil {
		return nil, err
	}
	vendor, err := vendorclient.New(cfg.Vendor, log)
	if err != nil {
		return nil, err
	}
	db, err := openMigrated(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	store := idempotency.NewStore(db)
	metrics := apphttp.NewMetrics([]string{"licenses.store"}, store.PendingStats)
	if d, ok := vendor.(*vendorclient.HTTPDriver); ok {
		d.Observe, d.OnRetry = metrics.ObserveVendor, metrics.ObserveVendorRetry
	}
	return &app{
		cfg: cfg, log: log, db: db, store: store, metrics: metrics,
		licenses: licenses.NewService(db, vendor, operationTimeout(cfg), nil),
	}, nil
}

func (a *app) close() { closeDB(a.db) }

// reconciler settles pending intents, one Resumer per guarded operation.
func (a *app) reconciler() *idempotency.Reconciler {
	return &idempotency.Reconciler{
		Store:       a.store,
		Resumers:    map[string]idempotency.Resumer{"licenses.store": apphttp.LicenseResumer{Licenses: a.licenses}},
		Settle:      a.cfg.Reconcile.Settle,
		MaxAttempts: a.cfg.Reconcile.MaxAttempts,
		Lease:       a.cfg.Idempotency.LockTimeout,
		TTL:         a.cfg.Idempotency.TTL,
		Backoff:     a.cfg.Reconcile.Interval,
		Log:         a.log,
		Observe:     a.metrics.ObserveReconcile,
	}
}

func (a *app) pruner() *idempotency.Pruner {
	return &idempotency.Pruner{Store: a.store, Batch: 500, Log: a.log, Observe: a.metrics.ObservePruned}
}

// reconcile is `licensor reconcile`: one pass over the due pending intents.
func reconcile(ctx context.Context, e env) error {
	return oneShot(ctx, e, "reconcile", "One pass over pending intents: each is settled through the vendor's sites for its domain.",
		func(a *app) error {
			settled, err := a.reconciler().RunOnce(ctx)
			for _, s := range settled {
				fmt.Fprintf(e.stdout, "%s\tkey %s\t%s\t%s\n", s.Operation, s.KeyDigest, s.Result, s.Ref)
			}
			fmt.Fprintf(e.stdout, "%d pending intent(s) worked\n", len(settled))
			return err
		})
}

// prune is `licensor prune`: one pass deleting expired idempotency records.
func prune(ctx context.Context, e env) error {
	return oneShot(ctx, e, "prune", "Deletes idempotency records older than IDEMPOTENCY_TTL (pending intents are kept).",
		func(a *app) error {
			n, err := a.pruner().RunOnce(ctx)
			fmt.Fprintf(e.stdout, "%d expired record(s) deleted\n", n)
			return err
		})
}

// oneShot runs a flagless command against the opened app.
func oneShot(ctx context.Context, e env, name, summary string, fn func(*app) error) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintf(fs.Output(), "usage: licensor %s\n\n%s\n", name, summary) }
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", name, fs.Arg(0))
	}
	a, err := openApp(ctx, e)
	if err != nil {
		return err
	}
	defer a.close()
	return fn(a)
}
