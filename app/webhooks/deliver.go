package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/hmacsig"
)

// The headers of a delivery (package client names the first two for
// receivers: client.SignatureHeader, client.EventIDHeader).
const (
	SignatureHeader  = "Licensor-Signature"   // hmacsig.Sign of the body under the endpoint's secret
	EventIDHeader    = "Licensor-Event-Id"    // the event's public id, the body's "id"
	DeliveryIDHeader = "Licensor-Delivery-Id" // the delivery's id: the same on every attempt
)

// Tuning of the worker.
const (
	// senders is how many attempts one worker makes at once. An attempt
	// mostly waits on the endpoint, so a worker has room for a few slow
	// endpoints beside the others (see share).
	senders = 16
	// claimBatch is the most deliveries one claim takes: as many as the
	// senders.
	claimBatch = senders
	// maxBackoff caps the wait between two attempts, so that an endpoint
	// that comes back is tried again within half a day.
	maxBackoff = 12 * time.Hour
	// breakerAfter is how many attempts in a row without an answer within
	// the timeout pause an endpoint as a whole (its circuit breaker opens).
	breakerAfter = 3
	// answerKept is how much of an answer's body is read (and discarded):
	// enough to keep the connection for the next delivery, never more.
	answerKept = 4 << 10
)

// The outcomes Observe is told of, one per settled attempt.
const (
	OutcomeDelivered = "delivered" // a 2xx
	OutcomeRetried   = "retried"   // failed, tried again after a backoff
	OutcomeFailed    = "failed"    // failed at the end of the retry window: given up
)

// Outcomes are every outcome Observe is told of.
var Outcomes = []string{OutcomeDelivered, OutcomeRetried, OutcomeFailed}

// lease is how long a claim holds a delivery: an attempt is bounded by
// Timeout, and a delivery is not started later than Timeout+5s after its
// claim (see send), so an attempt never outlives its lease.
func (s *Service) lease() time.Duration { return 2*s.cfg.Timeout + 5*time.Second }

// claimed is one delivery a worker holds, with what sending it needs.
type claimed struct {
	Delivery
	claimedAt time.Time
	endpoint  Endpoint
	event     events.Event
	found     bool // the endpoint and the event are there
}

// parkPending takes the endpoint's pending deliveries off the schedule
// (next_attempt_at NULL), as it is disabled: nothing is due for it, so no
// worker reads past them, until unparkPending.
func parkPending(tx *gorm.DB, endpointID string, now time.Time) error {
	err := tx.Model(&Delivery{}).Where("endpoint_id = ? AND status = ? AND claim IS NULL", endpointID, StatusPending).
		Updates(map[string]any{"next_attempt_at": nil, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("park the disabled endpoint's deliveries: %w", err)
	}
	return nil
}

// unparkPending makes the endpoint's parked deliveries due now, each with a
// new retry window, as it is enabled again.
func unparkPending(tx *gorm.DB, endpointID string, now time.Time) error {
	err := tx.Model(&Delivery{}).Where("endpoint_id = ? AND status = ? AND next_attempt_at IS NULL", endpointID, StatusPending).
		Updates(map[string]any{"next_attempt_at": now, "window_start": now, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("schedule the enabled endpoint's deliveries: %w", err)
	}
	return nil
}

// withSubjects adds to each claimed delivery its endpoint and its event.
func (s *Service) withSubjects(ctx context.Context, rows []Delivery, at time.Time) ([]claimed, error) {
	db := s.read.WithContext(ctx) // committed by the claim: the read pool sees them
	endpointIDs, eventIDs := make([]string, len(rows)), make([]uint64, len(rows))
	for i, d := range rows { // an id twice in an IN list reads its row once
		endpointIDs[i], eventIDs[i] = d.EndpointID, d.EventID
	}
	var eps []Endpoint
	if err := db.Where("id IN ?", padded(endpointIDs, claimBatch)).Find(&eps).Error; err != nil {
		return nil, fmt.Errorf("read the endpoints of claimed deliveries: %w", err)
	}
	var evs []events.Event
	if err := db.Where("id IN ?", padded(eventIDs, claimBatch)).Find(&evs).Error; err != nil {
		return nil, fmt.Errorf("read the events of claimed deliveries: %w", err)
	}
	epByID := make(map[string]Endpoint, len(eps))
	for _, e := range eps {
		epByID[e.ID] = e
	}
	evByID := make(map[uint64]events.Event, len(evs))
	for _, e := range evs {
		evByID[e.Seq] = e
	}
	out := make([]claimed, len(rows))
	for i, d := range rows {
		ep, okE := epByID[d.EndpointID]
		ev, okV := evByID[d.EventID]
		out[i] = claimed{Delivery: d, claimedAt: at, endpoint: ep, event: ev, found: okE && okV}
	}
	return out, nil
}

// attemptResult is what one POST came to.
type attemptResult struct {
	at       time.Time
	status   *int // the answer's; nil: none
	duration time.Duration
	reason   string // why it failed, one of Failures; "" when delivered
	timedOut bool   // no answer within the timeout: counts toward the endpoint's breaker
}

func (r attemptResult) delivered() bool { return r.reason == "" }

// send makes one attempt at a claimed delivery and records it. A delivery
// whose turn comes too late in its batch to finish within its lease, or
// after ctx ended, is given back unsent: due now, no attempt counted.
func (s *Service) send(ctx context.Context, c claimed) error {
	if ctx.Err() != nil || s.now().After(c.claimedAt.Add(s.cfg.Timeout+5*time.Second)) {
		return s.release(ctx, c)
	}
	// An attempt begun is finished (bounded by Timeout) and recorded, even
	// while the process shuts down: its answer decides.
	r := s.post(context.WithoutCancel(ctx), c)
	// Recorded within a bound of its own, so that a stuck database cannot
	// hold a shutdown: an attempt not recorded is sent again once its claim
	// lapses, as after a crash.
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	defer cancel()
	return s.record(rec, c, r)
}

// post sends the event to the endpoint: the event's body, the same bytes
// every attempt, signed now under the endpoint's secret. A failed attempt's
// reason is one of Failures.
func (s *Service) post(ctx context.Context, c claimed) attemptResult {
	r := attemptResult{at: s.now()}
	if !c.found {
		s.cfg.Log.Warn("webhook delivery: the endpoint or the event is gone", "delivery_id", c.ID)
		r.reason = FailureInternal
		return r
	}
	body, err := s.cfg.Events.Body(c.event)
	if err != nil {
		s.cfg.Log.Error("webhook delivery: read the event", "delivery_id", c.ID, "error", err)
		r.reason = FailureInternal
		return r
	}
	secret, err := s.secret(c.endpoint)
	if err != nil {
		s.cfg.Log.Error("webhook delivery: open the endpoint's secret", "delivery_id", c.ID, "endpoint_id", c.endpoint.ID, "error", err)
		r.reason = FailureInternal
		return r
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint.URL, bytes.NewReader(body))
	if err != nil {
		s.cfg.Log.Error("webhook delivery: the endpoint's url is not valid", "delivery_id", c.ID, "endpoint_id", c.endpoint.ID)
		r.reason = FailureInternal
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	req.Header.Set(SignatureHeader, hmacsig.Sign(secret, s.cfg.Now(), body))
	req.Header.Set(EventIDHeader, c.event.ID)
	req.Header.Set(DeliveryIDHeader, c.ID)
	start := time.Now()
	resp, err := s.client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, answerKept))
		_ = resp.Body.Close()
	}
	r.duration = time.Since(start)
	switch {
	case err != nil:
		r.reason = s.failure(ctx, c, err)
		r.timedOut = r.reason == FailureTimeout
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		r.status = &resp.StatusCode
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		r.status = &resp.StatusCode
		r.reason = FailureRedirect
	default:
		r.status = &resp.StatusCode
		r.reason = FailureHTTPStatus
	}
	return r
}

// failure is the class of a request that got no answer, which is all the
// consumer is shown: the address, and what a port there does, is for the
// operator's log alone (never the URL, whose query may hold a secret of
// the consumer's). At debug level, as an endpoint failing is the
// consumer's to fix; a failure of no known class at warn.
func (s *Service) failure(ctx context.Context, c claimed, err error) string {
	class := classify(err)
	level := slog.LevelDebug
	if class == FailureOther {
		level = slog.LevelWarn
	}
	s.cfg.Log.Log(ctx, level, "webhook attempt failed", "delivery_id", c.ID, "endpoint_id", c.endpoint.ID,
		"class", class, "error", detail(err))
	return class
}

// backoff is the wait after the attempts-th failed attempt: RetryBase
// doubling with each, plus up to a quarter more (jitter, so that the
// deliveries of an endpoint that was down do not all come back at once),
// at most maxBackoff.
func (s *Service) backoff(attempts int) time.Duration {
	d := s.doubled(attempts - 1)
	return min(d+s.jitter(d/4+1), maxBackoff)
}

// jitter is a random duration below max: Config.Jitter's, or uniform.
func (s *Service) jitter(max time.Duration) time.Duration {
	if s.cfg.Jitter == nil {
		return rand.N(max)
	}
	return s.cfg.Jitter(max)
}

// doubled is RetryBase doubled n times, or until it is maxBackoff or more.
func (s *Service) doubled(n int) time.Duration {
	d := s.cfg.RetryBase
	for i := 0; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return d
}

// record settles one attempt in one transaction, a compare-and-set on the
// claim: the attempt's row; the delivery delivered, retried after its
// backoff (the last retry at the end of its window) or failed at the end
// of its window; the endpoint's failing streak ended or begun, and the
// endpoint disabled, with its webhook_endpoint.disabled event, once it has
// failed every delivery for RetryFor. A worker that lost its claim (its
// lease lapsed and another claimed the delivery) records its attempt, which
// happened, and nothing else: the claim's holder decides.
func (s *Service) record(ctx context.Context, c claimed, r attemptResult) error {
	now := s.now()
	outcome := ""
	err := database.Transact(ctx, s.db, s.cfg.Retry, func(tx *gorm.DB) error {
		outcome = ""
		set := map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_status": r.status, "claim": nil, "updated_at": now}
		windowEnd := c.WindowStart.Add(s.cfg.RetryFor)
		switch {
		case r.delivered():
			outcome = OutcomeDelivered
			set["status"], set["delivered_at"], set["next_attempt_at"] = StatusDelivered, now, nil
		case !now.Before(windowEnd):
			outcome = OutcomeFailed
			set["status"], set["next_attempt_at"] = StatusFailed, nil
		default:
			outcome = OutcomeRetried
			next := now.Add(s.backoff(c.Attempts + 1))
			if next.After(windowEnd) {
				next = windowEnd // the last retry, at the end of the window
			}
			set["next_attempt_at"] = next
		}
		res := tx.Model(&Delivery{}).Where("id = ? AND claim = ?", c.ID, *c.Claim).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("record webhook delivery: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			outcome = ""
			var n int64
			if err := tx.Model(&Delivery{}).Where("id = ?", c.ID).Count(&n).Error; err != nil || n == 0 {
				return err // deleted with its endpoint: nothing to record
			}
		}
		if err := s.addAttempt(tx, c, r); err != nil || outcome == "" {
			return err
		}
		if err := s.breaker(tx, c, r, now); err != nil {
			return err
		}
		if r.delivered() {
			if c.endpoint.FailingSince == nil {
				// Not failing when claimed: nothing to end, and no write to
				// the endpoint's row, which every delivery to it would
				// otherwise queue on (MySQL locks the row an UPDATE reads,
				// matched or not, until commit). A streak begun since is
				// ended by the next delivery claimed after it.
				return nil
			}
			err := tx.Model(&Endpoint{}).Where("id = ? AND failing_since IS NOT NULL", c.EndpointID).
				Update("failing_since", nil).Error
			if err != nil {
				return fmt.Errorf("record the endpoint answering: %w", err)
			}
			return nil
		}
		return s.endpointFailed(tx, c.EndpointID, now)
	})
	if err != nil {
		return err
	}
	if outcome != "" {
		s.cfg.Observe(outcome)
	}
	return nil
}

func (s *Service) addAttempt(tx *gorm.DB, c claimed, r attemptResult) error {
	a := Attempt{DeliveryID: c.ID, AttemptedAt: r.at, ResponseStatus: r.status, DurationMS: r.duration.Milliseconds()}
	if r.reason != "" {
		a.Error = &r.reason
	}
	if err := tx.Create(&a).Error; err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	return nil
}

// breaker keeps the endpoint's circuit breaker: an attempt that got no
// answer within the timeout adds to the endpoint's timeouts in a row, and
// from breakerAfter on pauses the endpoint as a whole (no delivery to it is
// claimed) for RetryBase, doubling with each further timeout, at most
// maxBackoff; the attempt after the pause is the breaker's trial. Any
// answer, even a failing one, closes it. The endpoint's row is written only
// when there is something to change: a delivery to an answering endpoint
// costs it no write.
func (s *Service) breaker(tx *gorm.DB, c claimed, r attemptResult, now time.Time) error {
	if !r.timedOut {
		if c.endpoint.ConsecutiveTimeouts == 0 && c.endpoint.PausedUntil == nil {
			return nil
		}
		err := tx.Model(&Endpoint{}).Where("id = ?", c.EndpointID).
			UpdateColumns(map[string]any{"consecutive_timeouts": 0, "paused_until": nil}).Error
		if err != nil {
			return fmt.Errorf("close the endpoint's breaker: %w", err)
		}
		return nil
	}
	err := tx.Model(&Endpoint{}).Where("id = ?", c.EndpointID).
		UpdateColumn("consecutive_timeouts", gorm.Expr("consecutive_timeouts + 1")).Error
	if err != nil {
		return fmt.Errorf("count the endpoint's timeout: %w", err)
	}
	var n int
	if err := tx.Model(&Endpoint{}).Where("id = ?", c.EndpointID).Pluck("consecutive_timeouts", &n).Error; err != nil {
		return fmt.Errorf("read the endpoint's timeouts: %w", err)
	}
	if n < breakerAfter {
		return nil
	}
	until := now.Add(min(s.doubled(n-breakerAfter), maxBackoff))
	err = tx.Model(&Endpoint{}).Where("id = ?", c.EndpointID).UpdateColumn("paused_until", until).Error
	if err != nil {
		return fmt.Errorf("pause the endpoint: %w", err)
	}
	s.cfg.Log.Warn("webhook endpoint paused: its attempts keep timing out", "endpoint_id", c.EndpointID,
		"consumer_id", c.ConsumerID, "timeouts_in_a_row", n, "paused_until", until)
	return nil
}

// endpointFailed begins the endpoint's failing streak if it has none, and
// disables the endpoint once the streak has lasted RetryFor: in the same
// UPDATE its event sequence grows, and its webhook_endpoint.disabled event
// is appended in the same transaction, for the feed and the consumer's
// other endpoints.
func (s *Service) endpointFailed(tx *gorm.DB, endpointID string, now time.Time) error {
	err := tx.Model(&Endpoint{}).Where("id = ? AND failing_since IS NULL", endpointID).Update("failing_since", now).Error
	if err != nil {
		return fmt.Errorf("record the endpoint failing: %w", err)
	}
	reason := "every delivery failed for " + s.cfg.RetryFor.String()
	res := tx.Model(&Endpoint{}).Where("id = ? AND enabled = ? AND failing_since <= ?", endpointID, true, now.Add(-s.cfg.RetryFor)).
		Updates(map[string]any{"enabled": false, "disabled_at": now, "disabled_reason": reason,
			"event_sequence": gorm.Expr("event_sequence + 1"), "updated_at": now})
	if res.Error != nil {
		return fmt.Errorf("disable the failing endpoint: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil
	}
	if err := parkPending(tx, endpointID, now); err != nil {
		return err
	}
	e, err := s.endpoint(tx, "", endpointID)
	if err != nil {
		return err
	}
	err = s.cfg.Events.Append(tx, events.Draft{ConsumerID: e.ConsumerID, Type: events.EndpointDisabled, SubjectID: e.ID,
		Sequence: e.EventSequence, Data: map[string]any{"webhook_endpoint": e.Resource()}, At: now})
	if err != nil {
		return err
	}
	s.cfg.Log.Warn("webhook endpoint disabled", "endpoint_id", e.ID, "consumer_id", e.ConsumerID, "reason", reason)
	return nil
}

// release gives a claimed delivery back unsent: due now, its attempts as
// they were.
func (s *Service) release(ctx context.Context, c claimed) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	defer cancel()
	now := s.now()
	err := s.cfg.Retry(ctx, func() *gorm.DB {
		return s.db.WithContext(ctx).Model(&Delivery{}).Where("id = ? AND claim = ?", c.ID, *c.Claim).
			Updates(map[string]any{"claim": nil, "next_attempt_at": now, "updated_at": now})
	}).Error
	if err != nil {
		return fmt.Errorf("give back webhook delivery %s: %w", c.ID, err)
	}
	return nil
}
