package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultRedisURL is the Redis of the ratelimit comparison's redis store
// when neither -redis nor REDIS_URL names one.
const defaultRedisURL = "redis://127.0.0.1:6379/0"

// redisTarget is the Redis licensor counts in for the redis store, and
// the pid of the server listening on its port here (0: its CPU is not
// measured).
type redisTarget struct {
	url string
	pid int
}

// findRedis checks that the Redis at url answers a PING and finds its
// process; why says why it is left out when it is not usable.
func findRedis(ctx context.Context, url string) (t *redisTarget, why string) {
	if url == "" {
		return nil, "-redis is empty"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, "-redis does not parse: " + err.Error()
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, fmt.Sprintf("no Redis answers at %s: %v", opts.Addr, err)
	}
	t = &redisTarget{url: url}
	if _, p, err := net.SplitHostPort(opts.Addr); err == nil {
		if port, err := strconv.Atoi(p); err == nil {
			t.pid = listeningPID(port)
		}
	}
	return t, ""
}

// redactedURL is the Redis URL without its password, for the report.
func (t *redisTarget) redactedURL() string {
	opts, err := redis.ParseURL(t.url)
	if err != nil {
		return "(unparsable)"
	}
	return fmt.Sprintf("redis://%s/%d", opts.Addr, opts.DB)
}
