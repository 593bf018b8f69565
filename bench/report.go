package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// printHeader describes the machine and the run.
func printHeader(w io.Writer, o options) {
	load, _ := os.ReadFile("/proc/loadavg")
	fields := strings.Fields(string(load))
	if len(fields) > 3 {
		fields = fields[:3]
	}
	fmt.Fprintf(w, "# licensor bench\n\n")
	fmt.Fprintf(w, "- date: %s\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(w, "- command: %s\n", strings.Join(append([]string{"bench"}, os.Args[1:]...), " "))
	fmt.Fprintf(w, "- machine: %d CPUs, %s\n", runtime.NumCPU(), cpuModel())
	fmt.Fprintf(w, "- Go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- load average at start: %s\n", strings.Join(fields, " "))
	fmt.Fprintf(w, "- settings: duration %v (after %v warm-up), rounds %d, conns %d, RSS conns %d, big %d\n",
		o.duration, o.warmup, o.rounds, o.conns, o.rssConns, o.big)
	if o.against != "" {
		fmt.Fprintf(w, "- licensor built at %s (git archive)\n", o.against)
	} else {
		fmt.Fprintf(w, "- licensor built from the working tree%s\n", gitDescribe())
	}
	if o.baseline != "" {
		fmt.Fprintf(w, "- baseline: licensor built at %s (git archive)\n", o.baseline)
	}
	fmt.Fprintf(w, "- licensor: APP_ENV=production, fake vendor, LOG_LEVEL=warn, RATE_LIMIT_PER_MINUTE=0 except in the ratelimit comparison "+
		"(memory on SQLite; redis, database and off on MariaDB)\n\n")
}

// gitDescribe is the commit the working tree is on, and whether it has
// uncommitted changes: " (HEAD abc123, with uncommitted changes)".
func gitDescribe() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return " (not a git checkout)"
	}
	s := " (HEAD " + strings.TrimSpace(string(out))
	st := exec.Command("git", "status", "--porcelain", "--untracked-files=no")
	st.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0") // read only: no index refresh
	if out, err := st.Output(); err == nil && len(out) > 0 {
		s += ", with uncommitted changes"
	}
	return s + ")"
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// caseResult is one case's samples, a round each.
type caseResult struct {
	name    string
	samples []sample
}

// comparison is two cases measured in alternated rounds (with others,
// when compareRounds drew it: a case's samples may be in more than one).
type comparison struct {
	title string
	a, b  *caseResult
}

// rssResult is the memory of one server around a run at many connections.
type rssResult struct {
	name       string
	conns      int
	idle       memory // before the run, on a freshly started process
	after      memory // after it; HWM is the peak since start
	maxSampled int    // the largest VmRSS seen while the run went on
	s          sample
}

// dbReport is everything measured on one database.
type dbReport struct {
	title       string
	short       string // sqlite or mysql, for the per-round lines
	comparisons []*comparison
	rss         []rssResult
	notes       []string
}

// logSample prints one round's measurement as it is made.
func logSample(w io.Writer, db, cmp string, round int, name string, s sample) {
	dbCPU := ""
	if db == dialectMySQL {
		dbCPU = fmt.Sprintf(" + %5.0f DB", s.DBCPUPerReq)
	}
	if s.RedisMeasured {
		dbCPU += fmt.Sprintf(" + %4.0f Redis", s.RedisCPUPerReq)
	}
	fmt.Fprintf(w, "%-7s %-22s round %d  %-31s %6.0f req/s  p50 %6.2f ms  p99 %7.2f ms  %5.0f%s CPU-µs/req  non-2xx %d%s\n",
		db, cmp, round, name, s.RPS, ms(s.P50), ms(s.P99), s.CPUPerReq, dbCPU, s.Non2xx, statusNote(s))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// statusNote lists the non-2xx statuses and the transport errors.
func statusNote(s sample) string {
	var parts []string
	for _, code := range sortedKeys(s.Statuses) {
		if code < 200 || code > 299 {
			parts = append(parts, fmt.Sprintf("%d×%d", code, s.Statuses[code]))
		}
	}
	if s.Errors > 0 {
		parts = append(parts, fmt.Sprintf("transport errors×%d", s.Errors))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is "median [min–max]" (the median alone for one round).
func spread(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	m := fmt.Sprintf(format, median(xs))
	if len(xs) == 1 {
		return m
	}
	return fmt.Sprintf("%s ["+format+"–"+format+"]", m, lo, hi)
}

// column extracts one metric of every sample.
func column(ss []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// The metrics of a sample, for column and ratios.
func rps(s sample) float64      { return s.RPS }
func p50(s sample) float64      { return ms(s.P50) }
func p99(s sample) float64      { return ms(s.P99) }
func cpu(s sample) float64      { return s.CPUPerReq }
func dbCPU(s sample) float64    { return s.DBCPUPerReq }
func redisCPU(s sample) float64 { return s.RedisCPUPerReq }

// non2xx is the number of non-2xx answers of the samples, with their
// statuses and the transport errors.
func non2xx(ss []sample) string {
	n, e := 0, 0
	codes := map[int]int{}
	for _, s := range ss {
		n += s.Non2xx
		e += s.Errors
		for c, k := range s.Statuses {
			if c < 200 || c > 299 {
				codes[c] += k
			}
		}
	}
	return fmt.Sprint(n) + statusNote(sample{Statuses: codes, Errors: e})
}

// ratios is A/B of a metric, round by round, and their median.
func ratios(a, b []sample, f func(sample) float64) string {
	var rs []string
	var xs []float64
	for i := range min(len(a), len(b)) {
		if f(b[i]) == 0 {
			continue
		}
		r := f(a[i]) / f(b[i])
		xs = append(xs, r)
		rs = append(rs, fmt.Sprintf("%.3g", r))
	}
	if len(xs) == 0 {
		return "-"
	}
	if len(xs) == 1 {
		return rs[0]
	}
	return fmt.Sprintf("%s (median %.3g)", strings.Join(rs, " / "), median(xs))
}

// print writes the database's Markdown tables.
func (r *dbReport) print(w io.Writer) {
	fmt.Fprintf(w, "## %s\n\n", r.title)
	withDB := r.short == dialectMySQL
	withRedis := false // a column for Redis's CPU when a case counted there
	for _, c := range r.comparisons {
		for _, cr := range []*caseResult{c.a, c.b} {
			for _, s := range cr.samples {
				withRedis = withRedis || s.RedisMeasured
			}
		}
	}
	if len(r.comparisons) > 0 {
		dbHead, dbRule := "", ""
		if withDB {
			dbHead, dbRule = " MariaDB CPU µs/req |", " --- |"
		}
		if withRedis {
			dbHead, dbRule = dbHead+" Redis CPU µs/req |", dbRule+" --- |"
		}
		fmt.Fprintln(w, "| comparison | case | req/s | p50 ms | p99 ms | server CPU µs/req |"+dbHead+" non-2xx | A/B req/s per round | A/B server CPU/req per round |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |"+dbRule+" --- | --- | --- |")
		for _, c := range r.comparisons {
			for i, cr := range []*caseResult{c.a, c.b} {
				title, rr, rc := "", "", ""
				if i == 0 {
					title, rr, rc = c.title, ratios(c.a.samples, c.b.samples, rps), ratios(c.a.samples, c.b.samples, cpu)
				}
				dbCol := ""
				if withDB {
					dbCol = " " + spread(column(cr.samples, dbCPU), "%.0f") + " |"
				}
				if withRedis {
					redisCol := "-"
					if len(cr.samples) > 0 && cr.samples[0].RedisMeasured {
						redisCol = spread(column(cr.samples, redisCPU), "%.0f")
					}
					dbCol += " " + redisCol + " |"
				}
				fmt.Fprintf(w, "| %s | %s %s | %s | %s | %s | %s |%s %s | %s | %s |\n", title, string(rune('A'+i)), cr.name,
					spread(column(cr.samples, rps), "%.0f"), spread(column(cr.samples, p50), "%.2f"),
					spread(column(cr.samples, p99), "%.2f"), spread(column(cr.samples, cpu), "%.0f"),
					dbCol, non2xx(cr.samples), rr, rc)
			}
		}
		fmt.Fprintln(w)
	}
	if len(r.rss) > 0 {
		fmt.Fprintln(w, "| RSS run | conns | req/s | p99 ms | non-2xx | VmRSS idle MiB | VmRSS max sampled MiB | VmRSS after MiB | VmHWM MiB |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, m := range r.rss {
			fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %s | %.1f | %.1f | %.1f | %.1f |\n", m.name, m.conns,
				m.s.RPS, ms(m.s.P99), non2xx([]sample{m.s}), mib(m.idle.RSS), mib(m.maxSampled), mib(m.after.RSS), mib(m.after.HWM))
		}
		fmt.Fprintln(w)
	}
	for _, n := range r.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(r.notes) > 0 {
		fmt.Fprintln(w)
	}
}

func mib(kib int) float64 { return float64(kib) / 1024 }
