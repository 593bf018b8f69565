package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// requestFunc makes the next request of a case; it is called from many
// goroutines at once.
type requestFunc func(ctx context.Context) (*http.Request, error)

// maxErrorsPerConn stops a connection's loop once the server keeps failing
// at the transport level (it died), instead of spinning.
const maxErrorsPerConn = 100

// sample is the measurement of one case in one round.
type sample struct {
	Requests  int
	Non2xx    int
	Errors    int // transport errors: no response at all
	Statuses  map[int]int
	Elapsed   time.Duration
	RPS       float64
	P50, P99  time.Duration
	CPUPerReq float64 // server CPU µs per request, from /proc/<pid>/stat
	// DBCPUPerReq is the MariaDB server's CPU µs per request (0 on SQLite,
	// where the database runs inside the server and is in CPUPerReq).
	DBCPUPerReq float64
	// RedisCPUPerReq is the Redis server's CPU µs per request, in the cases
	// that count in Redis (RedisMeasured).
	RedisCPUPerReq float64
	RedisMeasured  bool
}

// loadRun is the closed-loop load of one case: conns keep-alive
// connections, each sending requests back to back.
type loadRun struct {
	conns int
	pid   int // the server whose CPU is measured
	dbPid int // the MariaDB server, 0 for none
	// redisPid is the Redis server the case counts in, 0 for none.
	redisPid int
	next     requestFunc
}

// run warms the server up for warmup (unmeasured), then measures for d on
// the same connections.
func (l loadRun) run(ctx context.Context, warmup, d time.Duration) (sample, error) {
	tr := &http.Transport{
		MaxIdleConnsPerHost: l.conns,
		MaxConnsPerHost:     l.conns,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	if warmup > 0 {
		if _, err := l.drive(ctx, client, warmup); err != nil {
			return sample{}, err
		}
	}
	before, err := cpuTicks(l.pid)
	if err != nil {
		return sample{}, err
	}
	dbBefore, redisBefore := ticksOf(l.dbPid), ticksOf(l.redisPid)
	s, err := l.drive(ctx, client, d)
	if err != nil {
		return s, err
	}
	after, err := cpuTicks(l.pid)
	if err != nil {
		return s, err
	}
	dbAfter, redisAfter := ticksOf(l.dbPid), ticksOf(l.redisPid)
	if s.Requests > 0 {
		s.CPUPerReq = float64(after-before) * ticksToMicros / float64(s.Requests)
		s.DBCPUPerReq = float64(dbAfter-dbBefore) * ticksToMicros / float64(s.Requests)
		if l.redisPid != 0 {
			s.RedisCPUPerReq, s.RedisMeasured = float64(redisAfter-redisBefore)*ticksToMicros/float64(s.Requests), true
		}
	}
	return s, nil
}

// connResult is what one connection's loop saw.
type connResult struct {
	lat      []time.Duration
	non2xx   int
	errors   int
	statuses map[int]int
	err      error
}

// drive runs the connections for d and merges what they saw.
func (l loadRun) drive(ctx context.Context, client *http.Client, d time.Duration) (sample, error) {
	start := time.Now()
	deadline := start.Add(d)
	results := make([]connResult, l.conns)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = l.loop(ctx, client, deadline) })
	}
	wg.Wait()
	s := sample{Elapsed: time.Since(start), Statuses: map[int]int{}}
	var all []time.Duration
	for _, r := range results {
		if r.err != nil {
			return s, r.err
		}
		all = append(all, r.lat...)
		s.Non2xx += r.non2xx
		s.Errors += r.errors
		for code, n := range r.statuses {
			s.Statuses[code] += n
		}
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	s.Requests = len(all)
	if s.Requests == 0 {
		return s, fmt.Errorf("no request completed (%d transport errors)", s.Errors)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	s.P50 = percentile(all, 0.50)
	s.P99 = percentile(all, 0.99)
	s.RPS = float64(s.Requests) / s.Elapsed.Seconds()
	return s, nil
}

// loop is one connection: requests back to back until the deadline.
func (l loadRun) loop(ctx context.Context, client *http.Client, deadline time.Time) connResult {
	r := connResult{statuses: map[int]int{}, lat: make([]time.Duration, 0, 4096)}
	for ctx.Err() == nil && time.Now().Before(deadline) && r.errors < maxErrorsPerConn {
		req, err := l.next(ctx)
		if err != nil {
			r.err = err
			return r
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			r.errors++
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			r.errors++
			continue
		}
		r.lat = append(r.lat, time.Since(t0))
		r.statuses[resp.StatusCode]++
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			r.non2xx++
		}
	}
	return r
}

// percentile of sorted latencies (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// ticksOf is a helper process's CPU ticks (the MariaDB or Redis server),
// 0 without one.
func ticksOf(pid int) uint64 {
	if pid == 0 {
		return 0
	}
	t, err := cpuTicks(pid)
	if err != nil {
		return 0
	}
	return t
}
