package vendorsim

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// deliverEvent delivers an event, twice with probability DupRate.
func (h *webhooks) deliverEvent(ev simEvent) {
	copies := 1
	if h.rng.Float64() < h.cfg.DupRate { // drawn for every event, so a seed gives one sequence
		copies = 2
	}
	for n := 1; n <= copies && h.ctx.Err() == nil; n++ {
		h.deliver(ev, n > 1)
	}
}

// deliver POSTs an event until the receiver answers 2xx, waiting between
// attempts as backoff says, for at most Attempts attempts. Its log lines
// name the event, never the secret or the signature.
func (h *webhooks) deliver(ev simEvent, dup bool) {
	for attempt := 1; ; attempt++ {
		status, err := h.post(ev)
		h.count(&h.stats.Sent)
		attrs := []any{"event", ev.id, "type", ev.kind, "site", ev.site, "attempt", attempt, "status", status}
		if dup {
			attrs = append(attrs, "duplicate", true)
		}
		if err != nil {
			attrs = append(attrs, "error", err.Error())
		}
		switch {
		case err == nil && status >= 200 && status < 300:
			h.count(&h.stats.Delivered)
			h.log.Info("vendor-sim: webhook delivered", attrs...)
			return
		case h.ctx.Err() != nil:
			h.log.Warn("vendor-sim: webhook abandoned at shutdown", attrs...)
			return
		case attempt >= h.cfg.Attempts:
			h.count(&h.stats.Failed)
			h.log.Warn("vendor-sim: webhook failed, attempts used up", attrs...)
			return
		}
		wait := h.backoff(attempt)
		h.log.Warn("vendor-sim: webhook not delivered, retrying", append(attrs, "wait", wait)...)
		if h.cfg.Sleep(h.ctx, wait) != nil {
			h.log.Warn("vendor-sim: webhook abandoned at shutdown", "event", ev.id, "type", ev.kind, "site", ev.site)
			return
		}
	}
}

func (h *webhooks) post(ev simEvent) (int, error) {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(ev.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "licensor-vendor-sim")
	req.Header.Set(vendorproto.SignatureHeader, vendorproto.Sign(h.cfg.Secret, h.cfg.Now(), ev.body))
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody)) // lets the connection be reused
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// backoff is the wait after failed attempt number attempt: RetryBase
// doubled per attempt, capped at RetryMax, less a seeded random part of up
// to half of it ("equal jitter").
func (h *webhooks) backoff(attempt int) time.Duration {
	step := h.cfg.RetryBase
	for i := 1; i < attempt && step < h.cfg.RetryMax; i++ {
		step *= 2
	}
	step = min(step, h.cfg.RetryMax)
	half := step / 2
	return step - half + time.Duration(h.rng.Int64N(int64(half)+1))
}
