package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/app/vendorsim"
)

// vendorSim serves the vendor protocol from memory, with faults on demand:
// what the http driver and the idempotency layer are tried against.
func vendorSim(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("vendor-sim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9090", "listen address")
	var opts vendorsim.SimOptions
	fs.StringVar(&opts.Token, "token", "", "bearer token to require, /_sim/ included; empty accepts any")
	fs.DurationVar(&opts.Latency, "latency", 0, "delay added to every request")
	fs.DurationVar(&opts.Jitter, "jitter", 0, "a random extra delay of 0..`D` on top of --latency")
	fs.IntVar(&opts.Burst429, "429-burst", 0, "answer the first `N` requests with 429")
	retryAfter := fs.Int("retry-after", 1, "Retry-After `seconds` sent with each 429; 0 sends none")
	fs.Float64Var(&opts.Rate429, "429-rate", 0, "probability `P`, 0..1, that a request answers 429 (before its work)")
	fs.Float64Var(&opts.Rate5xx, "5xx-rate", 0, "probability `P`, 0..1, that a request answers 500 (--fault-phase says when)")
	fs.Float64Var(&opts.DropRate, "drop-rate", 0, "probability `P`, 0..1, that a request's answer is dropped (--drop-mode, --fault-phase)")
	fs.IntVar(&opts.DropCreates, "drop-creates", 0, "commit the first `N` creates, then drop their answer")
	fs.IntVar(&opts.DropDeletes, "drop-deletes", 0, "commit the first `N` deletes, then drop their answer")
	fs.StringVar(&opts.DropMode, "drop-mode", vendorsim.DropHang, "`mode` of a dropped answer: hang (until the client gives up), close (the connection) or 5xx-after-commit (do the work, answer 500)")
	fs.StringVar(&opts.FaultPhase, "fault-phase", vendorsim.PhaseBefore, "`phase` at which a random 500 or drop strikes: before the work (nothing done), after it (done, answer lost), or random")
	seed := fs.Uint64("seed", 0, "seed `N` of the random faults; the default is taken from the clock and logged at start")
	fs.StringVar(&opts.StateFile, "state", "", "keep the sites in this JSON `file` across restarts; empty keeps them in memory")
	fs.StringVar(&opts.Webhook.URL, "webhook-url", "", "POST the events of /_sim/sites/{id}/… to this `URL`; empty sends none")
	fs.StringVar(&opts.Webhook.Secret, "webhook-secret", "", "`secret` that signs every webhook (Vendor-Signature); required with --webhook-url")
	fs.Float64Var(&opts.Webhook.DupRate, "webhook-dup-rate", 0, "probability `P`, 0..1, that a webhook is delivered twice")
	fs.BoolVar(&opts.Webhook.Shuffle, "webhook-shuffle", false, "deliver the webhooks queued together in a random order, seeded by --seed")
	setUsage(fs, "vendor-sim [flags]", "Serves the vendor protocol with faults: JSON with a Bearer token, 429 with Retry-After, and its calls:\n"+
		vendorCallsHelp()+
		"GET /_sim/stats counts calls by route and status; POST /_sim/faults sets the knobs it is given, the others kept (JSON, the flags' names with _); DELETE /_sim/faults clears every fault; "+
		"POST /_sim/reset forgets the sites and zeroes the stats. "+
		"POST /_sim/sites/{id}/suspend|reactivate|delete|rotate changes a site and sends a signed webhook to --webhook-url, retried with backoff. "+
		"Details: docs/operations.md, Vendor simulator.")
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("vendor-sim: unexpected argument %q", fs.Arg(0))
	}
	opts.RetryAfter = time.Duration(*retryAfter) * time.Second
	opts.Seed = *seed
	if !flagSet(fs, "seed") {
		opts.Seed = uint64(time.Now().UnixNano()) & (1<<53 - 1) // exact in JSON tools too
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	opts.Log = log
	sim, err := vendorsim.NewSimulator(opts)
	if errors.Is(err, vendorsim.ErrSimState) {
		return fmt.Errorf("vendor-sim: %w", err)
	}
	if err != nil {
		return usagef("vendor-sim: %v", err)
	}
	defer sim.Close() // after the server: no request queues an event any more
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("vendor-sim: listen on --addr %s: %w", *addr, err)
	}
	f, _ := sim.Faults()
	log.Info("vendor simulator serving", "addr", "http://"+ln.Addr().String(), "token_required", opts.Token != "",
		"seed", opts.Seed, "state", opts.StateFile, "sites", len(sim.Sites()),
		"latency", f.Latency, "jitter", f.Jitter, "429_burst", f.Burst429, "retry_after", f.RetryAfter,
		"429_rate", f.Rate429, "5xx_rate", f.Rate5xx, "drop_rate", f.DropRate,
		"drop_creates", f.DropCreates, "drop_deletes", f.DropDeletes, "drop_mode", f.DropMode, "fault_phase", f.FaultPhase,
		"webhook_url", webhookURL(opts.Webhook.URL), "webhook_dup_rate", opts.Webhook.DupRate, "webhook_shuffle", opts.Webhook.Shuffle)
	return serveSim(ctx, sim, ln, log)
}

// webhookURL is the webhook URL as logged: without a password, and "none"
// when there is none. The secret is never logged.
func webhookURL(raw string) string {
	if raw == "" {
		return "none"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// vendorCallsHelp is a line per vendor call, from the protocol's table.
func vendorCallsHelp() string {
	var b strings.Builder
	for _, c := range vendorproto.Calls {
		b.WriteString("  " + c.Help() + "\n")
	}
	return b.String()
}
