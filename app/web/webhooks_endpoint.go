package web

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/licensor-api/licensor/app/webhooks"
)

// endpointDeliveriesPerPage is the endpoint page's page of deliveries.
const endpointDeliveriesPerPage = 25

// endpointPage is an endpoint's page: the endpoint (never its secret) and
// a page of its deliveries with their attempts.
type endpointPage struct {
	Endpoint   endpointRow
	Status     string   // the deliveries' filter; "" for every status
	Statuses   []string // the filter's choices
	Deliveries []deliveryRow
	Total      int64
	Page       int
	PrevLink   string // "": no newer page
	NextLink   string // "": no older page
}

// webhookEndpoint is GET /console/webhooks/endpoints/:id[?status=&page=]:
// the endpoint and its deliveries, newest first, each with its attempts
// (as `licensor webhooks deliveries` and GET
// /api/webhook-endpoints/{id}/deliveries), and a Retry button each.
func (cn *Console) webhookEndpoint(c visit) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	e, err := cn.cfg.Webhooks.GetEndpoint(ctx, "", id)
	if err != nil {
		return err
	}
	p := endpointPage{Status: c.QueryParam("status"), Statuses: webhooks.Statuses, Page: queryPage(c)}
	page, err := cn.cfg.Webhooks.Deliveries(ctx, webhooks.DeliveryQuery{EndpointID: e.ID, Status: p.Status,
		Page: p.Page, PerPage: endpointDeliveriesPerPage})
	if err != nil {
		return err // an unknown status is the API's 422
	}
	names, err := cn.consumerNamesOf(ctx, []webhooks.Endpoint{e}, nil)
	if err != nil {
		return err
	}
	eps := endpointRows([]webhooks.Endpoint{e}, names)
	p.Endpoint, p.Deliveries, p.Total = eps[0], deliveryRows(page.Deliveries, names, eps), page.Total
	p.links(e.ID)
	return cn.render(c, http.StatusOK, "webhook_endpoint", view{Title: "Webhook endpoint " + e.ID, Section: "webhooks",
		Flash: webhookFlashes[c.QueryParam("done")], Data: p})
}

// links sets the pager's links to the newer and the older page, where
// there is one, keeping the status filter.
func (p *endpointPage) links(endpointID string) {
	link := func(n int) string {
		q := url.Values{}
		if p.Status != "" {
			q.Set("status", p.Status)
		}
		q.Set("page", strconv.Itoa(n))
		return Prefix + "/webhooks/endpoints/" + endpointID + "?" + q.Encode()
	}
	if p.Page > 1 {
		p.PrevLink = link(p.Page - 1)
	}
	if int64(p.Page*endpointDeliveriesPerPage) < p.Total {
		p.NextLink = link(p.Page + 1)
	}
}
