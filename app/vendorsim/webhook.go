package vendorsim

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/licensor-api/licensor/internal/wait"
)

const (
	defaultWebhookRetryBase = 100 * time.Millisecond
	defaultWebhookRetryMax  = 5 * time.Second
	defaultWebhookAttempts  = 10
	defaultWebhookTimeout   = 10 * time.Second
)

// SimWebhook configures the simulator's webhooks: the events of the
// /_sim/sites/{id}/… routes, POSTed to URL, signed with Secret, retried with
// backoff until Simulator.Close. The zero value sends none.
type SimWebhook struct {
	URL     string  // where events are POSTed (http or https); empty sends none
	Secret  string  // signs every delivery (Vendor-Signature); required with URL
	DupRate float64 // probability, 0..1, that an event is delivered twice
	Shuffle bool    // deliver the events queued together in a random order, seeded by SimOptions.Seed

	RetryBase time.Duration // the wait after the first failed attempt, doubled after each; 0 is 100ms
	RetryMax  time.Duration // the longest wait between attempts; 0 is 5s
	Attempts  int           // attempts per delivery before it fails; 0 is 10
	Timeout   time.Duration // the time one attempt may take; 0 is 10s

	// Sleep waits between attempts; it must return ctx.Err() early when ctx
	// ends. nil waits on a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of the events' "created" and of the signatures; nil
	// is time.Now.
	Now func() time.Time
}

func (w SimWebhook) normalized() (SimWebhook, error) {
	if !(w.DupRate >= 0 && w.DupRate <= 1) { // NaN too
		return w, fmt.Errorf("webhook-dup-rate %v is not between 0 and 1", w.DupRate)
	}
	if w.RetryBase < 0 || w.RetryMax < 0 || w.Attempts < 0 || w.Timeout < 0 {
		return w, fmt.Errorf("webhook retry base, max, attempts and timeout cannot be negative")
	}
	if w.URL != "" {
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return w, fmt.Errorf("webhook-url %q is not an http(s) URL", w.URL)
		}
		if w.Secret == "" {
			return w, fmt.Errorf("webhook-url needs a webhook-secret to sign the deliveries")
		}
	}
	w.RetryBase = cmp.Or(w.RetryBase, defaultWebhookRetryBase)
	w.RetryMax = max(cmp.Or(w.RetryMax, defaultWebhookRetryMax), w.RetryBase)
	w.Attempts = cmp.Or(w.Attempts, defaultWebhookAttempts)
	w.Timeout = cmp.Or(w.Timeout, defaultWebhookTimeout)
	if w.Sleep == nil {
		w.Sleep = wait.Sleep
	}
	if w.Now == nil {
		w.Now = time.Now
	}
	return w, nil
}

// WebhookStats counts the simulator's webhook deliveries: the "webhooks"
// of GET /_sim/stats. A duplicate is a delivery of its own.
type WebhookStats struct {
	Sent      int `json:"sent"`      // POSTs made: every attempt, retries and duplicates included
	Delivered int `json:"delivered"` // deliveries the receiver answered 2xx
	Failed    int `json:"failed"`    // deliveries given up after their last attempt
	Pending   int `json:"pending"`   // events queued or being delivered
}

// simEvent is one event on its way: the raw JSON sent, and what its log
// lines name.
type simEvent struct {
	id, kind, site string
	body           []byte
}

// webhooks queues the simulator's events and delivers them on a goroutine
// of its own.
type webhooks struct {
	cfg    SimWebhook
	log    *slog.Logger
	client *http.Client
	rng    *rand.Rand // shuffles, duplicates and jitter; the goroutine's alone
	ctx    context.Context
	stop   context.CancelFunc
	wake   chan struct{} // a token when events are queued
	done   chan struct{} // closed when the goroutine has returned

	mu     sync.Mutex
	queue  []simEvent
	closed bool
	stats  WebhookStats
}

// newWebhooks starts the delivery goroutine when cfg has a URL; without one
// it only builds events.
func newWebhooks(cfg SimWebhook, seed uint64, log *slog.Logger) *webhooks {
	ctx, stop := context.WithCancel(context.Background())
	h := &webhooks{cfg: cfg, log: log, ctx: ctx, stop: stop, wake: make(chan struct{}, 1), done: make(chan struct{}),
		rng:    rand.New(rand.NewPCG(seed, ^seed)),
		client: &http.Client{Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if cfg.URL == "" {
		close(h.done)
		return h
	}
	go h.run()
	return h
}

func (h *webhooks) enabled() bool { return h.cfg.URL != "" }

// enqueue queues an event for delivery; without a URL, or once closed, it
// is not sent.
func (h *webhooks) enqueue(ev simEvent) {
	if !h.enabled() {
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.log.Warn("vendor-sim: webhook not sent, the simulator is closing", "event", ev.id, "type", ev.kind, "site", ev.site)
		return
	}
	h.queue = append(h.queue, ev)
	h.stats.Pending++
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default: // a wake-up is already due
	}
}

// run delivers the queued events until close: all those queued together
// (while the last were delivered) form a batch, in the order they came or,
// with Shuffle, in a seeded random order.
func (h *webhooks) run() {
	defer close(h.done)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake:
		}
		for batch := h.take(); len(batch) > 0; batch = h.take() {
			if h.cfg.Shuffle {
				h.rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			}
			for _, ev := range batch {
				if h.ctx.Err() != nil {
					return
				}
				h.deliverEvent(ev)
				h.mu.Lock()
				h.stats.Pending--
				h.mu.Unlock()
			}
		}
	}
}

func (h *webhooks) take() []simEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	batch := h.queue
	h.queue = nil
	return batch
}

func (h *webhooks) count(n *int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*n++
}

func (h *webhooks) Stats() WebhookStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// zero zeroes the counts of deliveries; pending, a gauge, is left alone.
func (h *webhooks) zero() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats = WebhookStats{Pending: h.stats.Pending}
}

// close stops the goroutine, abandoning the events not yet delivered (a
// delivery in flight is cancelled), and waits for it to return.
func (h *webhooks) close() {
	h.mu.Lock()
	already := h.closed
	h.closed = true
	h.mu.Unlock()
	h.stop()
	<-h.done
	if already {
		return
	}
	if left := h.Stats().Pending; left > 0 {
		h.log.Warn("vendor-sim: webhooks abandoned at shutdown", "pending", left)
	}
}

// Close stops the webhook deliveries, abandoning (and logging) the events not
// yet delivered. Call it once the server no longer serves the simulator; it
// may be called more than once.
func (s *Simulator) Close() { s.hooks.close() }
