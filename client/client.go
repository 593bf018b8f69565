package client

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/licensor-api/licensor/internal/wait"
)

// Defaults of a Client. The wait before retry n (n ≥ 1) is drawn from
// [step/2, step], where step = DefaultBaseDelay·2^(n-1) capped at
// DefaultMaxDelay; a server's Retry-After replaces it when longer.
const (
	DefaultMaxAttempts = 8                      // attempts per call, the first included
	DefaultBaseDelay   = 200 * time.Millisecond // the first backoff step
	DefaultMaxDelay    = 5 * time.Second        // cap of the backoff step (not of a Retry-After)
	DefaultTimeout     = 30 * time.Second       // per attempt, of the default http.Client
	MaxResponseBytes   = 1 << 20                // a longer response body is an error
)

// Client calls licensor's API. It is safe for concurrent use; build it with
// New.
type Client struct {
	baseURL     string
	token       string
	hc          *http.Client
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	sleep       func(ctx context.Context, d time.Duration) error
	jitter      func(d time.Duration) time.Duration
	now         func() time.Time
	// networkWindow bounds how long a call retries network errors; 0: only
	// the attempts and the context bound it.
	networkWindow time.Duration
}

// Option changes a Client's defaults; pass options to New.
type Option func(*Client)

// New returns a Client for the API at baseURL (e.g. "http://127.0.0.1:8080")
// that authenticates with token, a bearer token from `licensor token issue`.
// The token is sent in the Authorization header and appears in no error.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		baseURL:     strings.TrimRight(baseURL, "/"),
		token:       token,
		hc:          &http.Client{Timeout: DefaultTimeout, CheckRedirect: noRedirects},
		maxAttempts: DefaultMaxAttempts,
		baseDelay:   DefaultBaseDelay,
		maxDelay:    DefaultMaxDelay,
		sleep:       wait.Sleep,
		jitter:      wait.Jitter,
		now:         time.Now,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithHTTPClient makes the Client send through hc; its Timeout bounds each
// attempt. A nil hc keeps the default.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithMaxAttempts sets how many attempts a call makes in all, the first
// included; n < 1 means 1.
func WithMaxAttempts(n int) Option {
	return func(c *Client) { c.maxAttempts = max(n, 1) }
}

// WithBackoff sets the first backoff step and the cap of the step; a value
// ≤ 0 keeps its default.
func WithBackoff(base, maxDelay time.Duration) Option {
	return func(c *Client) {
		if base > 0 {
			c.baseDelay = base
		}
		if maxDelay > 0 {
			c.maxDelay = maxDelay
		}
	}
}

// WithSleep replaces how the Client waits between attempts. sleep must
// return early with ctx.Err() when ctx ends; tests pass one that records d
// and returns at once.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) {
		if sleep != nil {
			c.sleep = sleep
		}
	}
}

// WithJitter replaces the random part of the backoff: jitter(d) returns a
// duration in [0, d] (a value outside is clamped). Tests pass a fixed one.
func WithJitter(jitter func(d time.Duration) time.Duration) Option {
	return func(c *Client) {
		if jitter != nil {
			c.jitter = jitter
		}
	}
}

// WithNetworkRetryWindow bounds how long a call goes on retrying network
// errors (a refused connection, a reset, a timeout): once the next attempt
// would start more than d after the first, the call stops with the last
// error, wrapping ErrNetworkWindow (and ErrNotSent when no attempt was
// written). Answers the policy retries (5xx, 429, 409 request_in_progress,
// 202 operation_pending) are bounded by the attempts and the context only.
// d ≤ 0, the default: no window.
func WithNetworkRetryWindow(d time.Duration) Option {
	return func(c *Client) { c.networkWindow = max(d, 0) }
}

// WithClock replaces the clock the Client reads to keep
// WithNetworkRetryWindow; tests pass one that their sleep moves forward.
// The context's deadline is always read on the real clock.
func WithClock(now func() time.Time) Option {
	return func(c *Client) {
		if now != nil {
			c.now = now
		}
	}
}

// String describes the Client without its token, so that printing one
// never leaks it.
func (c *Client) String() string { return "licensor client for " + c.baseURL }

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// noRedirects hands a 3xx back to the caller instead of following it: a
// redirect would turn a POST into a GET. It comes back as an *APIError.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
