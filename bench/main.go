// Command bench is licensor's load benchmark. It builds licensor, serves it
// as a real process on SQLite (and on MariaDB with -mysql or MYSQL_DSN),
// drives it with a closed-loop load generator, and prints one Markdown table
// per database comparing cases measured in alternated rounds (A, B, A, B, …).
//
//	go run ./bench                          # from the repository root
//	go run ./bench -duration 1s -rounds 1 -big 20000 -only replay-show
//	MYSQL_DSN='root@tcp(127.0.0.1:3306)/' go run ./bench
//
// It is its own module, so the repository's `go test ./...` never builds it.
// The hidden `peer` and `echo-peer` subcommands are the Fiber peer and the
// same-stack peer (Echo v4 on net/http) the bench starts itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Comparison names, for -only.
const (
	cmpReplayShow = "replay-show"
	cmpCreate     = "create"
	cmpRateLimit  = "ratelimit"
	cmpFiber      = "fiber"
	cmpRSS        = "rss"
	cmpIdemScale  = "idem-scale"
	cmpList       = "list"
	cmpCrypt      = "crypt"
	cmpBaseline   = "baseline"
	cmpGC         = "gc"
	cmpFloor      = "floor"
	cmpCache      = "replay-cache"
)

var allComparisons = []string{cmpReplayShow, cmpCreate, cmpRateLimit, cmpFiber, cmpRSS, cmpIdemScale, cmpList, cmpCrypt, cmpBaseline, cmpGC, cmpFloor, cmpCache}

// options are the command line's settings.
type options struct {
	duration time.Duration
	warmup   time.Duration
	rounds   int
	conns    int
	rssConns int
	big      int
	// batch is RATE_LIMIT_BATCH in the ratelimit comparison's batched
	// cases: the round trips it saves against the precision it costs (see
	// operations.md).
	batch    int
	mysqlDSN string
	redisURL string
	only     map[string]bool
	keep     bool
	// profile is the directory CPU profiles of licensor are written to (one
	// a measured run); empty: none.
	profile string
	// baseline is the revision the baseline comparison measures against
	// ("" none), and against the revision the other side is built from
	// ("": the working tree). See parseBaseline.
	baseline, against string
}

// want reports whether the comparison was asked for.
func (o options) want(name string) bool { return len(o.only) == 0 || o.only[name] }

func main() {
	if len(os.Args) > 1 && os.Args[1] == peerCommand {
		if err := runPeer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "peer:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == echoPeerCommand {
		if err := runEchoPeer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "echo peer:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each case in each round")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each measured run")
	fs.IntVar(&o.rounds, "rounds", 3, "alternated rounds of each comparison")
	fs.IntVar(&o.conns, "conns", 16, "keep-alive connections of the load generator")
	fs.IntVar(&o.rssConns, "rss-conns", 200, "connections of the RSS run")
	fs.IntVar(&o.batch, "batch", 16, "RATE_LIMIT_BATCH of the ratelimit comparison's batched cases (2 to 1000)")
	fs.IntVar(&o.big, "big", 1_000_000, "idempotency records (and the largest consumer's licenses) of the scale cases")
	fs.StringVar(&o.mysqlDSN, "mysql", os.Getenv("MYSQL_DSN"), "MariaDB/MySQL server DSN, e.g. root@tcp(127.0.0.1:3306)/ (default $MYSQL_DSN); empty: SQLite only")
	defaultRedis := os.Getenv("REDIS_URL")
	if defaultRedis == "" {
		defaultRedis = defaultRedisURL
	}
	fs.StringVar(&o.redisURL, "redis", defaultRedis, "Redis of the ratelimit comparison's redis store on MariaDB (default $REDIS_URL, else "+defaultRedisURL+
		"); empty, or a Redis that does not answer: that store is left out, said in the report")
	only := fs.String("only", "", "comma-separated comparisons to run: "+strings.Join(allComparisons, ","))
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (binary, databases, logs)")
	fs.StringVar(&o.profile, "profile", "", "write a CPU profile of licensor for each measured run into this directory (served on PPROF_ADDR)")
	baseline := fs.String("baseline", "", "the baseline comparison: keyed create and replay of the working tree against git revision REV, or of NEW against OLD with OLD..NEW, each licensor on a database of its own")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.baseline, o.against, err = parseBaseline(*baseline); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.duration <= 0 || o.rounds < 1 || o.conns < 1 || o.rssConns < 1 || o.big < 1000 || o.batch < 2 || o.batch > 1000 {
		return o, errors.New("-duration must be > 0, -rounds, -conns, -rss-conns >= 1, -big >= 1000, -batch from 2 to 1000")
	}
	o.only = map[string]bool{}
	for _, name := range strings.Split(*only, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if !contains(allComparisons, name) {
			return o, fmt.Errorf("-only: unknown comparison %q (known: %s)", name, strings.Join(allComparisons, ","))
		}
		o.only[name] = true
	}
	if o.only[cmpBaseline] && o.baseline == "" {
		return o, errors.New("-only baseline needs -baseline REV")
	}
	return o, nil
}

// parseBaseline reads -baseline: "REV" is the working tree against REV,
// "OLD..NEW" is NEW against OLD; "" is no baseline comparison.
func parseBaseline(v string) (baseline, against string, err error) {
	if v == "" {
		return "", "", nil
	}
	old, revNew, two := strings.Cut(v, "..")
	if old == "" || (two && revNew == "") || strings.HasPrefix(old, "-") || strings.HasPrefix(revNew, "-") {
		return "", "", fmt.Errorf("-baseline %q: want REV or OLD..NEW (git revisions)", v)
	}
	return old, revNew, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// run is the whole benchmark; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	printHeader(stdout, opts)
	b, err := newBench(ctx, opts, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	err = b.runAll(ctx)
	if cerr := b.cleanup(); cerr != nil {
		fmt.Fprintln(stderr, "bench: cleanup:", cerr)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench: interrupted")
		return 130
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// runAll runs every asked-for comparison on every database, then prints the
// tables.
func (b *bench) runAll(ctx context.Context) error {
	dialects := []string{dialectSQLite}
	if b.opts.mysqlDSN != "" {
		dialects = append(dialects, dialectMySQL)
	}
	var reports []*dbReport
	var errs []error
	for _, d := range dialects {
		rep, err := b.runDialect(ctx, d)
		if rep != nil {
			reports = append(reports, rep)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	var cryptRows []*cryptResult
	if b.opts.want(cmpCrypt) && ctx.Err() == nil {
		rows, err := b.cryptBench(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("crypt bench: %w", err))
		}
		cryptRows = rows
	}
	fmt.Fprintln(b.out)
	for _, r := range reports {
		r.print(b.out)
	}
	printCrypt(b.out, cryptRows)
	return errors.Join(errs...)
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[int]int) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
