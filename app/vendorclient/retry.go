package vendorclient

import "time"

// backoff is the wait before retry number attempt when the vendor gave no
// Retry-After: VENDOR_RETRY_BASE doubled per attempt, capped at
// VENDOR_RETRY_MAX_WAIT, less a random part of up to half of it ("equal
// jitter"), so that clients refused together come back apart.
func (d *HTTPDriver) backoff(attempt int) time.Duration {
	step := d.cfg.RetryBase
	for i := 1; i < attempt && step < d.cfg.RetryMaxWait; i++ {
		step *= 2
	}
	step = min(step, d.cfg.RetryMaxWait)
	return step - step/2 + d.jitter(step/2)
}
