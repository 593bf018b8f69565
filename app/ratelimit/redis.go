package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultRedisTimeout bounds one count in Redis: taking a connection (or
// dialling one), sending the script and reading its answer. A Redis on the
// same network answers in well under a millisecond; past this the request
// is counted in this process (Config.FallbackShare) rather than held.
const DefaultRedisTimeout = 100 * time.Millisecond

// DefaultKeyPrefix begins every key the Redis store writes, unless
// Config.KeyPrefix says otherwise: licensor:rl:<consumer id>.
const DefaultKeyPrefix = "licensor:rl:"

// keyTTL is how long a consumer's key lives after its window starts: past
// the window's end by at least a whole window (for replicas whose clocks
// lag), then Redis deletes it, so keys never pile up.
const keyTTL = 2 * Window

// hitScript counts ARGV[2] requests (one, or a batch: Config.Batch) at
// ARGV[1] (Unix seconds) in one atomic round trip. The key is a hash of the
// window's start (s) and count (h); a window that started ARGV[3] seconds
// ago or more is over, and the request starts the next one, with the key's
// expiry (a key never lives without one). It returns the count and the
// window's start. The time is the caller's, as in the other stores, so that
// every replica and every store dates windows alike.
var hitScript = redis.NewScript(`local now, n, len = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local s = tonumber(redis.call('HGET', KEYS[1], 's'))
if s == nil or now >= s + len then
  redis.call('HSET', KEYS[1], 's', now, 'h', n)
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return {n, now}
end
return {redis.call('HINCRBY', KEYS[1], 'h', n), s}`)

// redisCounter counts in Redis: one key per consumer, its window's start
// and count, which every replica counting in that Redis shares.
//
// When Redis is down, unreachable or slow, the request is counted in this
// process instead (see errNotCounted and fallback): an auxiliary store that
// is unavailable must neither take the API down with it nor lift the limit
// that guards the service against a runaway client. Each count is bounded
// by Config.RedisTimeout, so an outage adds at most that to a request,
// and a Redis that refuses connections costs next to nothing (go-redis
// stops dialling after a run of failed dials and probes in the
// background).
type redisCounter struct {
	client   *redis.Client
	timeout  time.Duration
	prefix   string
	password string // never in an error: see redactedError
}

func newRedisCounter(cfg Config) (*redisCounter, error) {
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // it quotes the URL, password and all
			return nil, errors.New("ratelimit: the Redis URL is not a URL")
		}
		u, _ := url.Parse(cfg.RedisURL)
		password, _ := u.User.Password() // nil-safe
		return nil, fmt.Errorf("ratelimit: the Redis URL: %w", redactedError{err, password})
	}
	timeout := cfg.RedisTimeout
	// Every wait is bounded by the timeout: the call's context carries it
	// (ContextTimeoutEnabled), and the dial, a socket read or write and
	// the wait for a pooled connection each stop at it too. One attempt:
	// a retry would be a second timeout on the request.
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = timeout, timeout, timeout, timeout
	opts.MaxRetries, opts.DialerRetries = -1, 1
	if opts.PoolSize == 0 {
		// A count holds a connection for one round trip (well under a
		// millisecond), so a few connections carry thousands of requests a
		// second; ten per CPU (go-redis's default, said here) absorbs a
		// burst of concurrent requests without waiting for one.
		opts.PoolSize = 10 * runtime.GOMAXPROCS(0)
	}
	if opts.MaintNotificationsConfig == nil { // a Redis Enterprise handshake a plain Redis refuses: not asked
		opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	return &redisCounter{client: redis.NewClient(opts), timeout: timeout, prefix: cfg.KeyPrefix, password: opts.Password}, nil
}

// hit adds by to the count of consumer's window at now and returns the
// count after and the window's start: one request, or a batch of them
// (batchCounter).
func (r *redisCounter) hit(ctx context.Context, consumer string, now time.Time, by, _ int64) (int64, time.Time, error) {
	call, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	args := []any{windowStart(now).Unix(), by, int64(Window / time.Second), int64(keyTTL / time.Second)}
	got, err := hitScript.Run(call, r.client, []string{r.prefix + consumer}, args...).Int64Slice()
	if err == nil && len(got) != 2 {
		err = fmt.Errorf("the script returned %d values, want 2", len(got))
	}
	if err != nil {
		if gaveUp := callerGaveUp(ctx); gaveUp != nil { // not Redis's failure
			return 0, time.Time{}, gaveUp
		}
		return 0, time.Time{}, fmt.Errorf("%w: redis: %w", errNotCounted, redactedError{err, r.password})
	}
	return got[0], time.Unix(got[1], 0).UTC(), nil
}

func (r *redisCounter) close() error { return r.client.Close() }

// callerGaveUp is ctx's error once the caller's context has ended or its
// deadline has passed. The deadline is read too: go-redis sets it on the
// socket, whose timeout can fire a moment before the context's own timer
// marks the context done, and that failure is the caller's, not Redis's.
func callerGaveUp(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// redactedError is err with the Redis password, should any error ever
// quote it, replaced: errors are logged.
type redactedError struct {
	err      error
	password string
}

func (e redactedError) Error() string {
	if e.password == "" {
		return e.err.Error()
	}
	return strings.ReplaceAll(e.err.Error(), e.password, "xxxxx")
}

func (e redactedError) Unwrap() error { return e.err }

// LogRedisTo routes go-redis's own log lines (a dial that failed, a
// connection it dropped) to log at DEBUG with component=redis, instead of
// go-redis's default, plain text on stderr, which would break a
// LOG_FORMAT=json stream. What an operator needs of a Redis outage is the
// Limiter's own line (DegradedMessage), once a minute. go-redis keeps one
// logger for the whole process: call LogRedisTo once, where the process
// builds its logger.
func LogRedisTo(log *slog.Logger) {
	redis.SetLogger(redisLogger{log: log})
}

// redisLogger is go-redis's Logging on an slog.Logger.
type redisLogger struct{ log *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "redis")
}
