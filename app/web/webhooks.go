package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/licensor-api/licensor/app/resource"
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

// endpointRow is an endpoint as the console shows it: the operator's
// resource (never its secret), and its URL as the page may show it.
type endpointRow struct {
	resource.ConsumerWebhookEndpoint
	ShownURL string // shownURL's
}

// deliveryRow is a delivery as the console shows it: the operator's
// resource (never its body), and its endpoint's URL as the page shows it.
type deliveryRow struct {
	resource.ConsumerWebhookDelivery
	EndpointURL string
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
	p.Endpoints = endpointRows(eps, names)
	p.Failing = deliveryRows(f.Rows, names, p.Endpoints)
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

// endpointRows are es as the console shows them, their consumers named by
// names.
func endpointRows(es []webhooks.Endpoint, names map[string]string) []endpointRow {
	out := make([]endpointRow, 0, len(es))
	for _, e := range resource.NewConsumerWebhookEndpoints(es, names) {
		out = append(out, endpointRow{ConsumerWebhookEndpoint: e, ShownURL: shownURL(e.URL)})
	}
	return out
}

// deliveryRows are ds as the console shows them, their consumers named by
// names and their endpoints' URLs from eps.
func deliveryRows(ds []webhooks.DeliveryView, names map[string]string, eps []endpointRow) []deliveryRow {
	urls := make(map[string]string, len(eps))
	for _, e := range eps {
		urls[e.ID] = e.ShownURL
	}
	out := make([]deliveryRow, 0, len(ds))
	for _, d := range resource.NewConsumerWebhookDeliveries(ds, names) {
		out = append(out, deliveryRow{ConsumerWebhookDelivery: d, EndpointURL: urls[d.EndpointID]})
	}
	return out
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
