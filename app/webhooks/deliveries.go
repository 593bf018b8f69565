package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/fault"
)

// DeliveryQuery selects deliveries: of one consumer (all: ""), of one
// endpoint (all: ""), in one status (all: ""), newest first, a page at a
// time.
type DeliveryQuery struct {
	ConsumerID string
	EndpointID string
	Status     string
	// Failing narrows to the deliveries failing: failed for good, or pending
	// after a failed attempt (as Backlog counts them).
	Failing bool
	Page    int // from 1
	PerPage int
}

// DeliveryView is a delivery with what the API shows of it: its event's
// public id and type, and its attempts, oldest first.
type DeliveryView struct {
	Delivery
	EventPublicID string
	EventType     string
	Attempts      []Attempt
}

// DeliveryPage is one page of deliveries.
type DeliveryPage struct {
	Deliveries []DeliveryView
	Total      int64
}

// ErrUnknownStatus is a delivery status filter that is none of Statuses.
var ErrUnknownStatus error = fault.New("unknown_delivery_status", "unknown delivery status")

// Deliveries lists the deliveries q selects, newest first, with their
// attempts.
func (s *Service) Deliveries(ctx context.Context, q DeliveryQuery) (DeliveryPage, error) {
	if q.Status != "" && !slices.Contains(Statuses, q.Status) {
		return DeliveryPage{}, fmt.Errorf("%w: %q", ErrUnknownStatus, q.Status)
	}
	if q.Page < 1 {
		q.Page = 1
	}
	if q.PerPage < 1 {
		q.PerPage = 15
	}
	db := s.read.WithContext(ctx)
	sel := db.Model(&Delivery{})
	if q.ConsumerID != "" {
		sel = sel.Where("consumer_id = ?", q.ConsumerID)
	}
	if q.EndpointID != "" {
		sel = sel.Where("endpoint_id = ?", q.EndpointID)
	}
	if q.Status != "" {
		sel = sel.Where("status = ?", q.Status)
	}
	if q.Failing {
		sel = sel.Where("(status = ? OR (status = ? AND attempts > 0))", StatusFailed, StatusPending)
	}
	var p DeliveryPage
	if err := sel.Count(&p.Total).Error; err != nil {
		return DeliveryPage{}, fmt.Errorf("count deliveries: %w", err)
	}
	var rows []Delivery
	if err := sel.Order("created_at DESC, id DESC").Offset((q.Page - 1) * q.PerPage).Limit(q.PerPage).Find(&rows).Error; err != nil {
		return DeliveryPage{}, fmt.Errorf("list deliveries: %w", err)
	}
	views, err := s.views(db, rows)
	if err != nil {
		return DeliveryPage{}, err
	}
	p.Deliveries = views
	return p, nil
}

// views adds to each delivery its event's id and type and its attempts.
func (s *Service) views(db *gorm.DB, rows []Delivery) ([]DeliveryView, error) {
	out := make([]DeliveryView, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids, eventIDs := make([]string, len(rows)), make([]uint64, len(rows))
	for i, d := range rows {
		ids[i], eventIDs[i] = d.ID, d.EventID
	}
	var evs []events.Event
	if err := db.Select("id", "public_id", "type").Where("id IN ?", eventIDs).Find(&evs).Error; err != nil {
		return nil, fmt.Errorf("read the deliveries' events: %w", err)
	}
	byID := make(map[uint64]events.Event, len(evs))
	for _, e := range evs {
		byID[e.Seq] = e
	}
	var attempts []Attempt
	if err := db.Where("delivery_id IN ?", ids).Order("id").Find(&attempts).Error; err != nil {
		return nil, fmt.Errorf("read the deliveries' attempts: %w", err)
	}
	of := make(map[string][]Attempt, len(rows))
	for _, a := range attempts {
		of[a.DeliveryID] = append(of[a.DeliveryID], a)
	}
	for i, d := range rows {
		e := byID[d.EventID]
		out[i] = DeliveryView{Delivery: d, EventPublicID: e.ID, EventType: e.Type, Attempts: of[d.ID]}
		if out[i].Attempts == nil {
			out[i].Attempts = []Attempt{}
		}
	}
	return out, nil
}

// GetDelivery returns one delivery (of the consumer's, and of the endpoint,
// when they are given) with its attempts.
func (s *Service) GetDelivery(ctx context.Context, consumerID, endpointID, id string) (DeliveryView, error) {
	db := s.read.WithContext(ctx)
	d, err := s.delivery(db, consumerID, endpointID, id)
	if err != nil {
		return DeliveryView{}, err
	}
	views, err := s.views(db, []Delivery{d})
	if err != nil {
		return DeliveryView{}, err
	}
	return views[0], nil
}

func (s *Service) delivery(db *gorm.DB, consumerID, endpointID, id string) (Delivery, error) {
	q := db.Where("id = ?", id)
	if consumerID != "" {
		q = q.Where("consumer_id = ?", consumerID)
	}
	if endpointID != "" {
		q = q.Where("endpoint_id = ?", endpointID)
	}
	var d Delivery
	err := q.Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Delivery{}, notFound("webhook delivery")
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("get webhook delivery: %w", err)
	}
	return d, nil
}

// ErrInFlight is a retry of a delivery a worker is sending now: its
// attempt decides, and a retry is for after it.
var ErrInFlight error = fault.New("delivery_in_progress", "the delivery is being sent")

// ConsumerRetryEvery is how often a consumer may retry a delivery of one
// endpoint: a retry makes a delivery due at once, past its backoff, and a
// consumer retrying in a loop would otherwise keep a sender on an endpoint
// that does not answer.
const ConsumerRetryEvery = time.Minute

// CodeRetryTooSoon is the code of a consumer's retry of a delivery within
// ConsumerRetryEvery of its last retry of a delivery to the same endpoint:
// a *fault.Error whose RetryAfter is how long until the endpoint's next
// retry is let through.
const CodeRetryTooSoon = "retry_limited"

// RetryDelivery makes the delivery due now, whatever its status, with a new
// retry window: a failed one is retried for another WEBHOOK_RETRY_FOR, a
// delivered one is sent again (the receiver drops it if it has it), and a
// pending one is tried now rather than at its backoff. One a worker is
// sending (its claim's lease not lapsed) is ErrInFlight. A consumer's own
// retry (consumerID given) goes through once per ConsumerRetryEvery per
// endpoint (CodeRetryTooSoon otherwise); no retry, an operator's either,
// bypasses the endpoint's circuit breaker: a paused endpoint's delivery is
// due, and is sent when the pause ends. The retry is in the audit trail, by
// by (the console, or the token of an API call), in the same transaction.
func (s *Service) RetryDelivery(ctx context.Context, by audit.Actor, consumerID, endpointID, id string) (DeliveryView, error) {
	err := database.Transact(ctx, s.db, s.cfg.Retry, func(tx *gorm.DB) error {
		d, err := s.delivery(tx, consumerID, endpointID, id)
		if err != nil {
			return err
		}
		now := s.now()
		// A claim whose lease has lapsed (its worker died) holds nothing.
		res := tx.Model(&Delivery{}).Where("id = ? AND (claim IS NULL OR next_attempt_at <= ?)", d.ID, now).
			Updates(map[string]any{"status": StatusPending, "window_start": now, "next_attempt_at": now, "claim": nil,
				"delivered_at": nil, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("retry webhook delivery: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrInFlight
		}
		if consumerID != "" { // after the in-flight check: a refusal rolls the retry back
			if err := s.consumerRetry(tx, d.EndpointID, now); err != nil {
				return err
			}
		}
		return audit.Record(tx, by, audit.Change{Event: audit.WebhookDeliveryRetried, SubjectType: audit.SubjectWebhookDelivery, SubjectID: d.ID}, now)
	})
	if err != nil {
		return DeliveryView{}, err
	}
	return s.GetDelivery(ctx, consumerID, endpointID, id)
}

// consumerRetry lets a consumer's retry of a delivery to the endpoint
// through, at most once per ConsumerRetryEvery: a compare-and-set on the
// endpoint's retried_at.
func (s *Service) consumerRetry(tx *gorm.DB, endpointID string, now time.Time) error {
	res := tx.Model(&Endpoint{}).Where("id = ? AND (retried_at IS NULL OR retried_at <= ?)", endpointID, now.Add(-ConsumerRetryEvery)).
		UpdateColumn("retried_at", now)
	if res.Error != nil {
		return fmt.Errorf("record the consumer's retry: %w", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	var ep Endpoint
	if err := tx.Select("retried_at").Where("id = ?", endpointID).Take(&ep).Error; err != nil {
		return fmt.Errorf("read the endpoint's last retry: %w", err)
	}
	if ep.RetriedAt == nil { // cannot be: the compare-and-set failed on it
		return fmt.Errorf("read the endpoint's last retry: none recorded")
	}
	after := max(time.Second, ep.RetriedAt.Add(ConsumerRetryEvery).Sub(now))
	return &fault.Error{Code: CodeRetryTooSoon, RetryAfter: after,
		Message: fmt.Sprintf("a delivery of this endpoint was retried less than %s ago; retry in %s", ConsumerRetryEvery, after)}
}
