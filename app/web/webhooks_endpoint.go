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
	names, err := cn.consumerNamesOf(ctx, []webhooks.Endpoint{e}, nil)
	if err != nil {
		return err
	}
	eps := endpointRows([]webhooks.Endpoint{e}, names)
	p.Endpoint, p.Deliveries = eps[0], deliveryRows(page.Deliveries, names, eps)
	p.Pager = deliveriesPager(e.ID, p.Status, n, page.Total)
	return cn.render(c, http.StatusOK, "webhook_endpoint", view{Title: "Webhook endpoint " + e.ID, Section: "webhooks",
		Flash: webhookFlashes[c.QueryParam("done")], Data: p})
}

// deliveriesPager is the pager of an endpoint's page of deliveries: links
// to the newer and the older page, where there is one, keeping the status
// filter.
func deliveriesPager(endpointID, status string, page int, total int64) pager {
	return newPager(Prefix+"/webhooks/endpoints/"+endpointID, map[string]string{"status": status}, page, endpointDeliveriesPerPage, total)
}
