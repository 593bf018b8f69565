package web

import (
	"net/http"

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
	Pager      pager
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
	p := endpointPage{Status: c.QueryParam("status"), Statuses: webhooks.Statuses}
	n := queryPage(c)
	page, err := cn.cfg.Webhooks.Deliveries(ctx, webhooks.DeliveryQuery{EndpointID: e.ID, Status: p.Status,
		Page: n, PerPage: endpointDeliveriesPerPage})
	if err != nil {
		return err // an unknown status is the API's 422
	}
	names, err := cn.consumerNames(ctx, e.ConsumerID)
	if err != nil {
		return err
	}
	eps := endpointRows([]webhooks.Endpoint{e}, names)
	p.Endpoint, p.Deliveries = eps[0], deliveryRows(page.Deliveries, names, eps)
	p.Pager = newPager(Prefix+"/webhooks/endpoints/"+e.ID, map[string]string{"status": p.Status}, n, endpointDeliveriesPerPage, page.Total)
	return cn.render(c, http.StatusOK, "webhook_endpoint", view{Title: "Webhook endpoint " + e.ID, Section: "webhooks",
		Flash: webhookFlashes[c.QueryParam("done")], Data: p})
}
