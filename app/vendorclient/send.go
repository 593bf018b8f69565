package vendorclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
	"github.com/licensor-api/licensor/internal/wait"
)

// maxBody is the most of an answer the driver reads; a longer one is malformed.
const maxBody = 1 << 20

// call is one request of a vendorproto.Call: its Name for logs and the
// observer, its OK for success, and Write (a write may have happened once
// sent: failures are uncertain).
type call struct {
	vendorproto.Call
	path string // after the base URL, escaped, with its query
	body []byte
	gone bool // the vendor's 404 is success too: a delete of a site already gone
}

var _ fmt.Stringer = call{} // errors and logs name the call with %s

func (c call) String() string { return c.Method + " " + c.path }

type answer struct {
	status  int
	header  http.Header
	body    []byte
	bodyErr error // reading the body failed, or it passed maxBody
}

// send makes the call, retrying a 429 within the budget, and returns the
// answer when its status is c.OK (or a 404 of a call where gone is success). Anything else is a classified error.
func (d *HTTPDriver) send(ctx context.Context, c call) (*answer, error) {
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		a, err := d.attempt(ctx, c, attempt)
		if err != nil {
			return nil, err
		}
		if a.status != http.StatusTooManyRequests {
			if err := d.judge(c, a); err != nil {
				return nil, err
			}
			return a, nil
		}
		retryAfter, given := wait.RetryAfter(a.header.Get("Retry-After"), d.now())
		wait := retryAfter
		if !given {
			wait = d.backoff(attempt)
		}
		if why := d.refuseWait(ctx, attempt, waited, wait); why != "" {
			d.log.Warn("vendor rate limit outlasts the retry budget", "call", c.Name, "attempt", attempt, "wait", wait, "reason", why)
			return nil, &licenses.UnavailableError{RetryAfter: retryAfter,
				Err: fmt.Errorf("%s: 429 after %d calls, not retried: %s", c, attempt, why)}
		}
		d.log.Warn("vendor rate limited, retrying", "call", c.Name, "attempt", attempt, "wait", wait)
		d.onRetry(c.Name)
		if err := d.sleep(ctx, wait); err != nil {
			return nil, &licenses.UnavailableError{RetryAfter: retryAfter, Err: fmt.Errorf("%s: waiting out a 429: %w", c, err)}
		}
		waited += wait
	}
}

// refuseWait says why a wait may not start: no retries left, the wait would
// pass VENDOR_RETRY_MAX_WAIT, or it would end past the context's deadline.
func (d *HTTPDriver) refuseWait(ctx context.Context, attempt int, waited, wait time.Duration) string {
	switch {
	case attempt > d.cfg.RetryAttempts:
		return fmt.Sprintf("VENDOR_RETRY_ATTEMPTS (%d) used up", d.cfg.RetryAttempts)
	case waited+wait > d.cfg.RetryMaxWait:
		return fmt.Sprintf("waiting %s more would pass VENDOR_RETRY_MAX_WAIT (%s)", wait, d.cfg.RetryMaxWait)
	}
	// The retried call needs time of its own: a write begun just before the
	// deadline would turn a definite "unavailable" into an uncertain outcome.
	room := min(d.cfg.Timeout, time.Second)
	if deadline, ok := ctx.Deadline(); ok && d.now().Add(wait+room).After(deadline) {
		return fmt.Sprintf("waiting %s would leave the call less than %s before the deadline", wait, room)
	}
	return ""
}

func (d *HTTPDriver) judge(c call, a *answer) error {
	switch {
	case a.status == c.OK || c.gone && a.status == http.StatusNotFound:
		return nil
	case a.status >= 400 && a.status < 500:
		return rejected(a)
	}
	err := d.failure(c, true, fmt.Errorf("%s: vendor answered %d", c, a.status))
	var unavailable *licenses.UnavailableError
	if errors.As(err, &unavailable) { // a 503's Retry-After is the vendor's word on when to come back
		unavailable.RetryAfter, _ = wait.RetryAfter(a.header.Get("Retry-After"), d.now())
	}
	return err
}

// failure classifies what went wrong with a call: nothing sent, or a read,
// is unavailable; a write that was sent is uncertain.
func (d *HTTPDriver) failure(c call, sent bool, err error) error {
	if c.Write && sent {
		d.log.Warn("vendor write outcome unknown", "call", c.Name, "error", err)
		return &licenses.UncertainError{Err: err}
	}
	d.log.Warn("vendor unavailable", "call", c.Name, "error", err)
	return &licenses.UnavailableError{Err: err}
}

func rejected(a *answer) error {
	var body vendorproto.ErrorBody
	if a.bodyErr != nil || json.Unmarshal(a.body, &body) != nil || body.Message == "" {
		body.Message = http.StatusText(a.status)
	}
	return &licenses.RejectedError{Status: a.status, Message: body.Message, Fields: body.Errors}
}

// attempt sends the call once, within its own timeout, and reads the answer.
func (d *HTTPDriver) attempt(ctx context.Context, c call, n int) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	var wrote atomic.Bool
	// WroteHeaders fires when the headers are written to the connection's
	// buffer, which may be before they leave (a dead kept-alive connection,
	// then a failed redial): such a write is judged uncertain though nothing
	// left. That errs the safe way: the reconciler finds no site and, after
	// RECONCILE_SETTLE, creates it once.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	req, err := d.request(ctx, c)
	if err != nil {
		return nil, &licenses.UnavailableError{Err: fmt.Errorf("%s: %w", c, err)}
	}
	start := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		d.observe(c.Name, 0)
		// Whether the headers were written decides what the error means. Before
		// that (dialling, DNS, the TLS handshake, waiting for a connection)
		// nothing reached the vendor; after it, a write may have happened.
		// The transport itself repeats a POST or DELETE only when it wrote
		// nothing, so one attempt here is one send at most.
		return nil, d.failure(c, wrote.Load(), fmt.Errorf("%s: %w", c, err))
	}
	defer resp.Body.Close()
	a := &answer{status: resp.StatusCode, header: resp.Header}
	a.body, a.bodyErr = readBody(resp.Body)
	d.observe(c.Name, resp.StatusCode)
	d.log.Debug("vendor call", "call", c.Name, "status", resp.StatusCode, "attempt", n, "took", time.Since(start))
	return a, nil
}

func (d *HTTPDriver) request(ctx context.Context, c call) (*http.Request, error) {
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, d.base+c.path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", d.userAgent)
	if c.Write { // the protocol: writes (POST and DELETE) send Content-Type
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func readBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("answer longer than %d bytes", maxBody)
	}
	return b, nil
}
