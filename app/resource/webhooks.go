package resource

import (
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/webhooks"
)

// WebhookEndpoint is a webhook endpoint as the API shows it: never its
// secret (app/webhooks renders it, as a webhook_endpoint.disabled event
// carries it too).
type WebhookEndpoint = webhooks.EndpointResource

// NewWebhookEndpoints presents es.
func NewWebhookEndpoints(es []webhooks.Endpoint) []WebhookEndpoint {
	return list(es, webhooks.Endpoint.Resource)
}

// ConsumerWebhookEndpoint is an endpoint as an operator sees it (`licensor
// webhooks list --json`, the console's webhooks pages): the API's object,
// whose it is, and since when its deliveries fail (null: they do not).
type ConsumerWebhookEndpoint struct {
	WebhookEndpoint
	ConsumerID   string  `json:"consumer_id"`
	Consumer     *string `json:"consumer"` // the consumer's name; null when not on record
	FailingSince *string `json:"failing_since"`
}

// NewConsumerWebhookEndpoints presents es for an operator, consumerNames id → name.
func NewConsumerWebhookEndpoints(es []webhooks.Endpoint, consumerNames map[string]string) []ConsumerWebhookEndpoint {
	return list(es, func(e webhooks.Endpoint) ConsumerWebhookEndpoint {
		v := ConsumerWebhookEndpoint{WebhookEndpoint: e.Resource(), ConsumerID: e.ConsumerID, FailingSince: TimeOrNil(e.FailingSince)}
		if n, ok := consumerNames[e.ConsumerID]; ok {
			v.Consumer = &n
		}
		return v
	})
}

// CreatedWebhookEndpoint is the answer to a new endpoint: the endpoint and
// its signing secret, shown this once.
type CreatedWebhookEndpoint struct {
	WebhookEndpoint
	Secret string `json:"secret"`
}

// WebhookEndpointLocation is an endpoint's path, as a 201's Location header.
func WebhookEndpointLocation(id string) string { return "/api/webhook-endpoints/" + id }

// WebhookAttempt is one attempt at a delivery. A nil pointer is JSON null:
// no answer (refused, timed out, not allowed), or no error.
type WebhookAttempt struct {
	AttemptedAt    string  `json:"attempted_at"`
	ResponseStatus *int    `json:"response_status"`
	DurationMS     int64   `json:"duration_ms"`
	Error          *string `json:"error"`
}

// WebhookDelivery is one event owed to one endpoint, with its attempts,
// oldest first (GET /api/webhook-endpoints/{id}/deliveries).
type WebhookDelivery struct {
	ID            string           `json:"id"`
	EndpointID    string           `json:"endpoint_id"`
	EventID       string           `json:"event_id"` // the event's public id, evt_…
	EventType     string           `json:"event_type"`
	Status        string           `json:"status"`
	AttemptCount  int              `json:"attempt_count"`
	NextAttemptAt *string          `json:"next_attempt_at"`
	DeliveredAt   *string          `json:"delivered_at"`
	CreatedAt     string           `json:"created_at"`
	UpdatedAt     string           `json:"updated_at"`
	Attempts      []WebhookAttempt `json:"attempts"`
}

// LastAttempt is the delivery's latest attempt, nil before the first: its
// answer and its error are what a list of deliveries shows.
func (d WebhookDelivery) LastAttempt() *WebhookAttempt {
	if len(d.Attempts) == 0 {
		return nil
	}
	return &d.Attempts[len(d.Attempts)-1]
}

// NewWebhookDelivery presents v.
func NewWebhookDelivery(v webhooks.DeliveryView) WebhookDelivery {
	return WebhookDelivery{
		ID: v.ID, EndpointID: v.EndpointID, EventID: v.EventPublicID, EventType: v.EventType, Status: v.Status,
		AttemptCount: v.Delivery.Attempts, NextAttemptAt: TimeOrNil(v.NextAttemptAt), DeliveredAt: TimeOrNil(v.DeliveredAt),
		CreatedAt: events.Time(v.CreatedAt), UpdatedAt: events.Time(v.UpdatedAt),
		Attempts: list(v.Attempts, func(a webhooks.Attempt) WebhookAttempt {
			return WebhookAttempt{AttemptedAt: events.Time(a.AttemptedAt), ResponseStatus: a.ResponseStatus, DurationMS: a.DurationMS, Error: a.Error}
		}),
	}
}

// NewWebhookDeliveries presents vs.
func NewWebhookDeliveries(vs []webhooks.DeliveryView) []WebhookDelivery {
	return list(vs, NewWebhookDelivery)
}

// ConsumerWebhookDelivery is a delivery as an operator sees it
// (GET /api/webhook-deliveries): whose it is, then the delivery.
type ConsumerWebhookDelivery struct {
	Consumer   string `json:"consumer"` // the consumer's name
	ConsumerID string `json:"consumer_id"`
	WebhookDelivery
}

// NewConsumerWebhookDeliveries presents vs for an operator, consumerNames id → name.
func NewConsumerWebhookDeliveries(vs []webhooks.DeliveryView, consumerNames map[string]string) []ConsumerWebhookDelivery {
	return list(vs, func(v webhooks.DeliveryView) ConsumerWebhookDelivery {
		return ConsumerWebhookDelivery{Consumer: consumerNames[v.ConsumerID], ConsumerID: v.ConsumerID, WebhookDelivery: NewWebhookDelivery(v)}
	})
}
