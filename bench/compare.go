package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// caseSpec is one side of a comparison. prepare readies the server (most
// cases: nothing; the rate limit cases restart it) and returns the load to
// run and what to do once it has run.
type caseSpec struct {
	name    string
	prepare func(ctx context.Context) (loadRun, func() error, error)
}

// fixedCase is a case on a server that is already running.
func fixedCase(name string, conns int, srv func() *process, next func(url string) requestFunc) caseSpec {
	return caseSpec{name: name, prepare: func(context.Context) (loadRun, func() error, error) {
		p := srv()
		return loadRun{conns: conns, pid: p.pid(), next: next(p.url)}, func() error { return nil }, nil
	}}
}

// compare measures a and b in alternated rounds (A, B, A, B, …) and adds
// the comparison to the report.
func (b *bench) compare(ctx context.Context, rep *dbReport, title string, a, bb caseSpec) error {
	return b.compareRounds(ctx, rep, title, []caseSpec{a, bb}, []pairing{{title, 0, 1}})
}

// pairing is one comparison drawn from the cases of compareRounds: cases
// a and b (indexes) under title.
type pairing struct {
	title string
	a, b  int
}

// compareRounds measures the cases in alternated rounds (A, B, C, A, B, C,
// …) and adds to the report one comparison per pairing, each from the same
// samples: three stores compared with each other cost three runs a round,
// not six. title labels the per-round lines.
func (b *bench) compareRounds(ctx context.Context, rep *dbReport, title string, cases []caseSpec, pairs []pairing) error {
	results := make([]*caseResult, len(cases))
	for i, c := range cases {
		results[i] = &caseResult{name: c.name}
	}
	for _, p := range pairs {
		rep.comparisons = append(rep.comparisons, &comparison{title: p.title, a: results[p.a], b: results[p.b]})
	}
	for round := 1; round <= b.opts.rounds; round++ {
		for i, spec := range cases {
			profile := fmt.Sprintf("%s-%s-%s-round%d.pprof", rep.short, title, spec.name, round)
			s, err := b.measure(ctx, spec, b.opts.warmup, b.opts.duration, profile)
			if err != nil {
				return fmt.Errorf("%s, %s, round %d: %w", title, spec.name, round, err)
			}
			results[i].samples = append(results[i].samples, s)
			logSample(b.out, rep.short, title, round, spec.name, s)
		}
	}
	return nil
}

// measure prepares a case, runs its load and tears it down. With -profile,
// a CPU profile of the server over the measured time is written to the
// file named profile in that directory.
func (b *bench) measure(ctx context.Context, spec caseSpec, warmup, d time.Duration, profile string) (sample, error) {
	l, done, err := spec.prepare(ctx)
	if err != nil {
		return sample{}, err
	}
	l.dbPid = b.dbPid
	var profiled chan error
	if p := b.processOf(l.pid); p != nil && p.pprof != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- b.cpuProfile(ctx, p, warmup, d, profile) }()
	}
	s, err := l.run(ctx, warmup, d)
	if profiled != nil {
		if perr := <-profiled; err == nil {
			err = perr
		}
	}
	if derr := done(); err == nil {
		err = derr
	}
	return s, err
}

// rssRun restarts a server (restart returns the fresh process), then runs
// its replay at many connections while sampling its VmRSS.
func (b *bench) rssRun(ctx context.Context, rep *dbReport, name string, restart func(ctx context.Context) (*process, error), next func(url string) requestFunc) error {
	p, err := restart(ctx)
	if err != nil {
		return err
	}
	idle, err := readMemory(p.pid())
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	maxRSS := idle.RSS
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if m, err := readMemory(p.pid()); err == nil {
					maxRSS = max(maxRSS, m.RSS)
				}
			}
		}
	})
	s, err := loadRun{conns: b.opts.rssConns, pid: p.pid(), dbPid: b.dbPid, next: next(p.url)}.run(ctx, b.opts.warmup, b.opts.duration)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	after, err := readMemory(p.pid())
	if err != nil {
		return err
	}
	r := rssResult{name: name, conns: b.opts.rssConns, idle: idle, after: after, maxSampled: max(maxRSS, after.RSS), s: s}
	rep.rss = append(rep.rss, r)
	logSample(b.out, rep.short, "rss", 1, name, s)
	fmt.Fprintf(b.out, "%-7s %-22s VmRSS idle %.1f MiB, max sampled %.1f MiB, after %.1f MiB, VmHWM %.1f MiB\n",
		rep.short, "rss", mib(idle.RSS), mib(r.maxSampled), mib(after.RSS), mib(after.HWM))
	return nil
}
