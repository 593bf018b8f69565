package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/webhooks"
)

// webhooksPage is the webhooks page's data: every consumer's endpoints (or
// one consumer's) and the deliveries that are failing.
type webhooksPage struct {
	Consumer        string // the filter: a consumer's name
	UnknownConsumer bool   // no consumer has that name
	Endpoints       []endpointRow
	Failing         []deliveryRow // the newest failing deliveries
	Count           failing       // how many (its Rows unused)
}

// endpointRow is an endpoint as the console shows it: never its secret.
type endpointRow struct {
	ID             string
	Consumer       string
	URL            string
	Description    string
	Events         string
	Enabled        bool
	DisabledAt     *time.Time
	DisabledReason string
	FailingSince   *time.Time
	Created        time.Time
}

// deliveryRow is a delivery as the console shows it: never its body.
type deliveryRow struct {
	ID          string
	EndpointID  string
	EndpointURL string
	Consumer    string
	EventID     string // the event's public id, evt_…
	EventType   string
	Status      string
	Attempts    []attemptRow
	LastError   string // the last attempt's error class, as app/webhooks wrote it (webhooks.Failures)
	LastAnswer  *int   // the last attempt's answer status; nil: none
	NextAttempt *time.Time
	Delivered   *time.Time
	Created     time.Time
}

// attemptRow is one attempt at a delivery.
type attemptRow struct {
	At         time.Time
	Status     *int // the answer's status; nil: no answer
	DurationMS int64
	Error      string
}

// webhookFlashes are the notices a redirect to a webhooks page may ask for.
var webhookFlashes = map[string]string{
	"retried": "Delivery retried: it is due now, with a new retry window; a worker sends it within a poll interval.",
}

// failingShown is how many failing deliveries the webhooks page lists.
const failingShown = 50

// webhooks is GET /console/webhooks[?consumer=NAME]: the endpoints (as
// `licensor webhooks list`) and the failing deliveries (as GET
// /api/webhook-deliveries), each with a Retry button. Managing an endpoint
// stays its consumer's, through the API.
func (cn *Console) webhooks(c visit) error {
	ctx := c.Request().Context()
	p := webhooksPage{Consumer: strings.TrimSpace(c.QueryParam("consumer"))}
	consumerID := ""
	if p.Consumer != "" {
		id, found, err := cn.consumerID(ctx, p.Consumer)
		if err != nil {
			return err
		}
		if !found {
			p.UnknownConsumer = true
			return cn.render(c, http.StatusOK, "webhooks", view{Title: "Webhooks", Section: "webhooks", Data: p})
		}
		consumerID = id
	}
	eps, err := cn.cfg.Webhooks.ListEndpoints(ctx, consumerID)
	if err != nil {
		return err
	}
	f, err := cn.failingDeliveries(ctx, consumerID)
	if err != nil {
		return err
	}
	names, err := cn.consumerNamesOf(ctx, eps, f.Rows)
	if err != nil {
		return err
	}
	urls := make(map[string]string, len(eps))
	for _, e := range eps {
		p.Endpoints = append(p.Endpoints, newEndpointRow(e, names))
		urls[e.ID] = shownURL(e.URL)
	}
	for _, d := range f.Rows {
		p.Failing = append(p.Failing, newDeliveryRow(d, names, urls))
	}
	f.Rows, p.Count = nil, f
	return cn.render(c, http.StatusOK, "webhooks", view{Title: "Webhooks", Section: "webhooks",
		Flash: webhookFlashes[c.QueryParam("done")], Data: p})
}

// failing is what the webhooks page knows of the failing deliveries.
type failing struct {
	Rows    []webhooks.DeliveryView // the newest failingShown of them
	Total   int64                   // failing in all
	Backlog webhooks.Backlog        // every consumer's, as the dashboard shows them (when no consumer is named)
}

// failingDeliveries are the consumer's (every consumer's for "") failing
// deliveries, newest first: failed for good, or pending after a failed
// attempt, as the dashboard counts them (webhooks.Backlog).
func (cn *Console) failingDeliveries(ctx context.Context, consumerID string) (failing, error) {
	page, err := cn.cfg.Webhooks.Deliveries(ctx, webhooks.DeliveryQuery{ConsumerID: consumerID, Failing: true, PerPage: failingShown})
	if err != nil {
		return failing{}, err
	}
	f := failing{Rows: page.Deliveries, Total: page.Total}
	if consumerID == "" {
		if f.Backlog, err = cn.cfg.Webhooks.Backlog(ctx); err != nil {
			return failing{}, err
		}
	}
	return f, nil
}

// consumerNamesOf names the consumers of the endpoints and deliveries.
func (cn *Console) consumerNamesOf(ctx context.Context, eps []webhooks.Endpoint, ds []webhooks.DeliveryView) (map[string]string, error) {
	var ids []string
	for _, e := range eps {
		ids = append(ids, e.ConsumerID)
	}
	for _, d := range ds {
		ids = append(ids, d.ConsumerID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	return cn.cfg.Auth.ConsumerNames(ctx, ids)
}

// newEndpointRow is e as the console shows it, its consumer named by names.
func newEndpointRow(e webhooks.Endpoint, names map[string]string) endpointRow {
	return endpointRow{ID: e.ID, Consumer: names[e.ConsumerID], URL: shownURL(e.URL), Description: e.Description,
		Events: strings.Join(e.Types(), ", "), Enabled: e.Enabled, DisabledAt: e.DisabledAt, DisabledReason: deref(e.DisabledReason),
		FailingSince: e.FailingSince, Created: e.CreatedAt}
}

// newDeliveryRow is d as the console shows it, its consumer named by names
// and its endpoint's URL from urls.
func newDeliveryRow(d webhooks.DeliveryView, names, urls map[string]string) deliveryRow {
	r := deliveryRow{ID: d.ID, EndpointID: d.EndpointID, EndpointURL: urls[d.EndpointID], Consumer: names[d.ConsumerID],
		EventID: d.EventPublicID, EventType: d.EventType, Status: d.Status, NextAttempt: d.NextAttemptAt, Delivered: d.DeliveredAt,
		Created: d.CreatedAt}
	for _, a := range d.Attempts {
		r.Attempts = append(r.Attempts, attemptRow{At: a.AttemptedAt, Status: a.ResponseStatus, DurationMS: a.DurationMS, Error: deref(a.Error)})
	}
	if n := len(r.Attempts); n > 0 {
		r.LastError, r.LastAnswer = r.Attempts[n-1].Error, r.Attempts[n-1].Status
	}
	return r
}

// retryDelivery is POST /console/webhooks/deliveries/:id/retry, as `licensor
// webhooks retry` and the API's retry: the delivery due now with a new
// retry window, by the session's token in the audit trail; then its
// endpoint's page. One a worker is sending now is 409 delivery_in_progress.
func (cn *Console) retryDelivery(c visit) error {
	id := c.Param("id")
	d, err := cn.cfg.Webhooks.RetryDelivery(c.Request().Context(), c.actor(), "", "", id)
	if err != nil {
		return err
	}
	cn.cfg.Log.Info("webhook delivery retried", "delivery", d.ID, "endpoint", d.EndpointID, "token_id", c.principal().TokenID,
		"request_id", requestID(c))
	return c.Redirect(http.StatusSeeOther, Prefix+"/webhooks/endpoints/"+d.EndpointID+"?done=retried")
}

// shownURL is an endpoint's URL as the console shows it: its scheme, host
// and path, without its query or user info, which may hold a secret of the
// consumer's (a token in ?key=…); the delivery worker keeps URLs out of its
// error text for the same reason.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an address that cannot be shown)"
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	if u.RawQuery != "" || u.User != nil {
		return shown.String() + " (query or credentials hidden)"
	}
	return shown.String()
}
