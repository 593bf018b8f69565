package console

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/licensor-api/licensor/app/vendorclient"
)

// vendorSim serves the vendor protocol from memory, with faults on demand,
// until ctx is done: what the http driver and the idempotency layer are
// tried against by hand.
func vendorSim(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("vendor-sim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9090", "listen address")
	var opts vendorclient.SimOptions
	fs.StringVar(&opts.Token, "token", "", "bearer token to require; empty accepts any")
	fs.DurationVar(&opts.Latency, "latency", 0, "delay added to every request")
	fs.IntVar(&opts.Burst429, "429-burst", 0, "answer the first `N` requests with 429")
	retryAfter := fs.Int("retry-after", 1, "Retry-After `seconds` sent with each 429; 0 sends none")
	fs.Float64Var(&opts.Rate5xx, "5xx-rate", 0, "share of requests, 0..1, answered 500 (every 1/rate-th, not random)")
	fs.IntVar(&opts.DropCreates, "drop-creates", 0, "commit the first `N` creates, then drop their answer")
	fs.IntVar(&opts.DropDeletes, "drop-deletes", 0, "commit the first `N` deletes, then drop their answer")
	fs.StringVar(&opts.DropMode, "drop-mode", vendorclient.DropHang, "how an answer is dropped: hang (until the client gives up) or close (the connection)")
	setUsage(fs, "vendor-sim [flags]", "Serves the vendor protocol from memory, with faults: JSON with a Bearer token, GET /sites?domain=D, POST /sites {name,domain} (201), DELETE /sites/{id} (204, 404 when gone), 429 with Retry-After (see app/vendorclient's package doc).")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("vendor-sim: unexpected argument %q", fs.Arg(0))
	}
	opts.RetryAfter = time.Duration(*retryAfter) * time.Second
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	opts.Log = log
	sim, err := vendorclient.NewSimulator(opts)
	if err != nil {
		return usagef("vendor-sim: %v", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("vendor-sim: listen on --addr %s: %w", *addr, err)
	}
	log.Info("vendor simulator serving", "addr", "http://"+ln.Addr().String(), "token_required", opts.Token != "",
		"latency", opts.Latency, "429_burst", opts.Burst429, "retry_after", opts.RetryAfter, "5xx_rate", opts.Rate5xx,
		"drop_creates", opts.DropCreates, "drop_deletes", opts.DropDeletes, "drop_mode", opts.DropMode)
	return serveSim(ctx, sim, ln, log)
}

// serveSim serves until ctx ends. Requests run on ctx, so a create held by
// --drop-mode hang ends with the command instead of holding up the shutdown.
func serveSim(ctx context.Context, h http.Handler, ln net.Listener, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if err := serveUntilDone(ctx, srv, ln, 5*time.Second, log); err != nil {
		return fmt.Errorf("vendor-sim: %w", err)
	}
	return nil
}
