package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// request is one API call: what every attempt of it sends again.
type request struct {
	op      string // what the caller asked, the prefix of its errors: "create license"
	method  string
	path    string // from the base URL, query included
	body    []byte // nil: no body
	key     string // the Idempotency-Key; "" sends none
	success []int  // the statuses that are the call's success
	// safe: sending the request again after it may have arrived changes
	// nothing (a GET, a DELETE, a PATCH, a keyed create), so a network error
	// is retried even after the request was written. A request that is not
	// safe is retried only when no byte of it left (the connection was never
	// made), or on an answer that says nothing was done (429, 503).
	safe bool
	// goneIfLost: a 404 answering a retry after an attempt whose answer was
	// lost is the call's success (a DELETE the lost attempt did).
	goneIfLost bool
}

// response is a successful answer, its body read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends r until it succeeds or the retry policy stops; then it returns
// the last attempt's error, wrapped with why it stopped.
//
// When no attempt got as far as writing its request (each one's connection
// was refused or never made, as while licensor restarts), the error wraps
// ErrNotSent: the server cannot have acted on the call. Such attempts are
// retried like any network error, so that a call rides out a restart.
func (c *Client) do(ctx context.Context, r request) (response, error) {
	anySent, lost := false, false
	start := c.now()
	for attempt := 1; ; attempt++ {
		resp, retry, sent, err := c.attempt(ctx, r)
		anySent = anySent || sent
		var apiErr *APIError
		isAnswer := errors.As(err, &apiErr)
		if err != nil && !anySent {
			err = fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		switch {
		case err == nil:
			return resp, nil
		case isAnswer && apiErr.Status == http.StatusNotFound && r.goneIfLost && lost:
			return response{status: http.StatusNotFound}, nil
		case !retry:
			return response{}, fmt.Errorf("%s: %w", r.op, err)
		case ctx.Err() != nil:
			return response{}, giveUp(r.op, attempt, ctx.Err(), err)
		case attempt >= c.maxAttempts:
			return response{}, giveUp(r.op, attempt, nil, err)
		}
		lost = lost || (!isAnswer && sent)
		wait := c.wait(attempt, err)
		// Waiting past the deadline would only fail later: fail now.
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return response{}, giveUp(r.op, attempt, context.DeadlineExceeded, err)
		}
		if !isAnswer && c.networkWindow > 0 && c.now().Add(wait).Sub(start) > c.networkWindow {
			return response{}, giveUp(r.op, attempt, fmt.Errorf("%w (%s)", ErrNetworkWindow, c.networkWindow), err)
		}
		if wait > max(c.maxDelay, MaxRetryAfter) { // never back before the server said: stop now instead
			return response{}, giveUp(r.op, attempt, ErrRetryAfterTooLong, err)
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return response{}, giveUp(r.op, attempt, serr, err)
		}
	}
}

// ErrNetworkWindow is why a call stopped retrying a network error: the next
// attempt would have started after WithNetworkRetryWindow's window.
var ErrNetworkWindow = errors.New("network errors past the retry window")

// giveUp is the error of a call the policy stopped retrying: the last
// attempt's error, and why (nil: the attempts are spent).
func giveUp(op string, attempts int, why, last error) error {
	n := strconv.Itoa(attempts) + " attempts"
	if attempts == 1 {
		n = "1 attempt"
	}
	if why == nil || errors.Is(last, why) {
		return fmt.Errorf("%s: gave up after %s: %w", op, n, last)
	}
	return fmt.Errorf("%s: gave up after %s (%w): %w", op, n, why, last)
}

// ErrNotSent is in the error of a call none of whose attempts wrote its
// request: on each one the connection was refused (nothing listens at the
// URL, as while licensor restarts) or never made, so the server did
// nothing. Any other failed call may have been acted on (its answer was
// lost): retry it with the same Idempotency-Key.
var ErrNotSent = errors.New("nothing was sent")

// attempt sends r once. retry says whether the policy may send it again:
// a network error or timeout (a refused connection included) when r is
// safe to repeat or nothing of it was written, or an APIError that is
// Retryable (for a request that is not safe, a 429 or 503 only). sent says
// whether the request was written, in part or whole: an answer came, or the
// error came after the write.
func (c *Client) attempt(ctx context.Context, r request) (_ response, retry, sent bool, _ error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// Called once the request is written, or its write failed (then
		// some of it may have gone out: counted as sent).
		WroteHeaders: func() { wrote.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, r.method, c.baseURL+r.path, body)
	if err != nil {
		return response{}, false, false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "licensor-go-client")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	res, err := c.hc.Do(req) // its errors name the URL, never the headers
	if err != nil {
		sent := wrote.Load()
		return response{}, transient(err) && (r.safe || !sent), sent, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, MaxResponseBytes+1))
	if err != nil {
		return response{}, r.safe, true, fmt.Errorf("read the response to %s %s: %w", r.method, r.path, err)
	}
	if !slices.Contains(r.success, res.StatusCode) {
		e := newAPIError(res.StatusCode, res.Header, b, time.Now())
		nothingDone := e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
		return response{}, e.Retryable() && (r.safe || nothingDone), true, e
	}
	if len(b) > MaxResponseBytes {
		return response{}, false, true, fmt.Errorf("the response to %s %s is over %d bytes", r.method, r.path, MaxResponseBytes)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}, false, true, nil
}

// wait is the pause before retry number attempt: half the step plus a
// random part of up to the other half ("equal jitter", so that clients
// refused together come back apart), the step doubling from baseDelay up
// to maxDelay. A longer Retry-After from the server wins, whole: the client
// never comes back before it (do stops at once when that is longer than it
// waits at all: MaxRetryAfter, or maxDelay when longer).
func (c *Client) wait(attempt int, last error) time.Duration {
	step := c.baseDelay
	for i := 1; i < attempt && step < c.maxDelay; i++ {
		step *= 2
	}
	step = min(step, c.maxDelay)
	half := step / 2
	d := step - half + min(max(c.jitter(half), 0), half)
	var apiErr *APIError
	if errors.As(last, &apiErr) && apiErr.RetryAfter > d {
		d = apiErr.RetryAfter
	}
	return d
}

// MaxRetryAfter is the longest Retry-After the client waits out by itself:
// a server asking for longer (a proxy asking for a day) ends the call at
// once with ErrRetryAfterTooLong, its *APIError carrying the RetryAfter, so
// that the caller can come back then; the client never retries earlier than
// it was told.
const MaxRetryAfter = time.Minute

// ErrRetryAfterTooLong is why a call stopped when the server asked to wait
// longer than MaxRetryAfter.
var ErrRetryAfterTooLong = errors.New("the server asks to wait longer than the client waits (MaxRetryAfter)")

// transient reports whether a failed round trip may succeed if repeated: a
// timeout, a connection refused or reset, or a connection closed early.
// A request that can never be sent (a bad header, a bad certificate, a
// redirect loop) is not repeated.
func transient(err error) bool {
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	case errors.As(err, &opErr):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return true
	}
	return false
}

// parseRetryAfter reads a Retry-After header: whole seconds, or an HTTP date
// (a date already past means now). given is false when there is no usable value.
func parseRetryAfter(v string, now time.Time) (wait time.Duration, given bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
