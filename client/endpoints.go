package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// WebhookEndpoint is one of the consumer's webhook endpoints
// (ability webhooks:manage).
type WebhookEndpoint struct {
	ID             string     `json:"id"`
	URL            string     `json:"url"`
	Description    string     `json:"description"`
	Events         []string   `json:"events"` // event types, or "license.*"
	Enabled        bool       `json:"enabled"`
	DisabledAt     *time.Time `json:"disabled_at"`
	DisabledReason string     `json:"disabled_reason"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	// Secret is the signing secret (whsec_…), set by CreateWebhookEndpoint
	// only: the API shows it in that answer and never again. Store it.
	Secret string `json:"secret,omitempty"`
}

// WebhookEndpointInput is what CreateWebhookEndpoint registers. Events nil
// means ["license.*"].
type WebhookEndpointInput struct {
	URL         string   `json:"url"`
	Events      []string `json:"events,omitempty"`
	Description string   `json:"description,omitempty"`
}

// WebhookEndpointUpdate is what UpdateWebhookEndpoint changes: each field
// that is set (non-nil).
type WebhookEndpointUpdate struct {
	URL     *string  `json:"url,omitempty"`
	Events  []string `json:"events,omitempty"`
	Enabled *bool    `json:"enabled,omitempty"`
}

// WebhookDelivery is one event owed to an endpoint.
type WebhookDelivery struct {
	ID            string            `json:"id"`
	EndpointID    string            `json:"endpoint_id"`
	EventID       string            `json:"event_id"`
	EventType     string            `json:"event_type"`
	Status        string            `json:"status"` // "pending", "delivered" or "failed"
	AttemptCount  int               `json:"attempt_count"`
	NextAttemptAt *time.Time        `json:"next_attempt_at"`
	DeliveredAt   *time.Time        `json:"delivered_at"`
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
	Attempts      []DeliveryAttempt `json:"attempts"`
}

// DeliveryAttempt is one attempt of a delivery: the endpoint's status
// (nil without an answer) and the class of its failure ("timeout",
// "connection_refused", …; "" when delivered).
type DeliveryAttempt struct {
	AttemptedAt    time.Time `json:"attempted_at"`
	ResponseStatus *int      `json:"response_status"`
	DurationMS     int       `json:"duration_ms"`
	Error          string    `json:"error"`
}

// DeliveriesPage is one page of an endpoint's deliveries, newest first.
type DeliveriesPage struct {
	Deliveries  []WebhookDelivery
	CurrentPage int
	PerPage     int
	Total       int
	LastPage    int
}

// CreateWebhookEndpoint registers an endpoint; the answer carries its
// Secret, shown this once. Without an Idempotency-Key it is retried only when
// nothing was sent or on a 429 or 503: after a network error once sent, list
// the endpoints before creating again.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, in WebhookEndpointInput) (WebhookEndpoint, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("create webhook endpoint: %w", err)
	}
	resp, err := c.do(ctx, request{op: "create webhook endpoint", method: http.MethodPost, path: "/api/webhook-endpoints",
		body: body, success: []int{http.StatusCreated}})
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return decodeData[WebhookEndpoint]("create webhook endpoint", resp.body)
}

// ListWebhookEndpoints returns the consumer's endpoints, oldest first.
func (c *Client) ListWebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	resp, err := c.do(ctx, request{op: "list webhook endpoints", method: http.MethodGet, path: "/api/webhook-endpoints",
		success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return nil, err
	}
	return decodeData[[]WebhookEndpoint]("list webhook endpoints", resp.body)
}

// GetWebhookEndpoint returns the endpoint with that id; another consumer's
// or an unknown id is an *APIError with Status 404.
func (c *Client) GetWebhookEndpoint(ctx context.Context, id string) (WebhookEndpoint, error) {
	op := "get webhook endpoint " + id
	if id == "" {
		return WebhookEndpoint{}, errors.New(op + ": the id is empty")
	}
	resp, err := c.do(ctx, request{op: op, method: http.MethodGet, path: endpointPath(id), success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return decodeData[WebhookEndpoint](op, resp.body)
}

// UpdateWebhookEndpoint changes the endpoint's url, events or enabled and
// returns it. Setting fields to values is safe to repeat: it is retried as
// a GET is.
func (c *Client) UpdateWebhookEndpoint(ctx context.Context, id string, u WebhookEndpointUpdate) (WebhookEndpoint, error) {
	op := "update webhook endpoint " + id
	if id == "" {
		return WebhookEndpoint{}, errors.New(op + ": the id is empty")
	}
	body, err := json.Marshal(u)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("%s: %w", op, err)
	}
	resp, err := c.do(ctx, request{op: op, method: http.MethodPatch, path: endpointPath(id), body: body,
		success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return decodeData[WebhookEndpoint](op, resp.body)
}

// DeleteWebhookEndpoint deletes the endpoint and its deliveries. It is
// retried as a GET is; a 404 answering a retry after an attempt whose
// answer was lost means that attempt deleted it: success.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("delete webhook endpoint: the id is empty")
	}
	_, err := c.do(ctx, request{op: "delete webhook endpoint " + id, method: http.MethodDelete, path: endpointPath(id),
		success: []int{http.StatusNoContent}, safe: true, goneIfLost: true})
	return err
}

// ListWebhookDeliveries returns one page of what is owed to the endpoint,
// newest first: status "" (all), "pending", "delivered" or "failed"; page
// and perPage (1–100) ≤ 0 take the API's defaults (1 and 15).
func (c *Client) ListWebhookDeliveries(ctx context.Context, endpointID, status string, page, perPage int) (DeliveriesPage, error) {
	op := "list deliveries of webhook endpoint " + endpointID
	if endpointID == "" {
		return DeliveriesPage{}, errors.New(op + ": the id is empty")
	}
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	data, meta, err := getPage[WebhookDelivery](ctx, c, op, pagePath(endpointPath(endpointID)+"/deliveries", q, page, perPage))
	if err != nil {
		return DeliveriesPage{}, err
	}
	return DeliveriesPage{Deliveries: data, CurrentPage: meta.CurrentPage, PerPage: meta.PerPage, Total: meta.Total,
		LastPage: meta.LastPage}, nil
}

// RetryWebhookDelivery makes the delivery due now, with a new retry window,
// and returns it (pending: the attempt is still to come). A delivery being
// sent right now is a 409 delivery_in_progress; a second retry of the
// endpoint within a minute is a 429 retry_limited, waited out by the
// policy. Not repeated after a network error once sent (a repeat would
// count against the minute): check the delivery instead.
func (c *Client) RetryWebhookDelivery(ctx context.Context, endpointID, deliveryID string) (WebhookDelivery, error) {
	op := "retry delivery " + deliveryID
	if endpointID == "" || deliveryID == "" {
		return WebhookDelivery{}, errors.New(op + ": an id is empty")
	}
	resp, err := c.do(ctx, request{op: op, method: http.MethodPost,
		path: endpointPath(endpointID) + "/deliveries/" + url.PathEscape(deliveryID) + "/retry", success: []int{http.StatusAccepted}})
	if err != nil {
		return WebhookDelivery{}, err
	}
	return decodeData[WebhookDelivery](op, resp.body)
}

func endpointPath(id string) string { return "/api/webhook-endpoints/" + url.PathEscape(id) }

func decodeData[T any](op string, body []byte) (T, error) {
	var b struct {
		Data T `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		var zero T
		return zero, fmt.Errorf("%s: decode the response: %w", op, err)
	}
	return b.Data, nil
}
