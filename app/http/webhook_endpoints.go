package http

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/internal/fault"
)

// defaultDeliveriesPerPage is the page size of the deliveries' listings
// without per_page: Laravel's paginate() default, as the licenses'.
const defaultDeliveriesPerPage = 15

// createWebhookEndpoint is POST /api/webhook-endpoints {"url","events",
// "description"}: 201 with Location and the endpoint with its signing
// secret, which no other answer shows. events omitted is every license
// event. A field of the wrong JSON type and the endpoint's own checks
// (the URL policy, the event types, the limits) are one 422, every failing
// field in request.CreateEndpointRules' order; a consumer at
// webhooks.MaxEndpoints is 409 too_many_endpoints.
func (s *Server) createWebhookEndpoint(c echo.Context) error {
	raw, err := readObject(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	in, typeErrs := request.BindCreateEndpoint(raw)
	if typeErrs != nil {
		return request.MergeFields(typeErrs, s.webhooks.CheckEndpoint(ctx, in), request.CreateEndpointRules)
	}
	e, secret, err := s.webhooks.CreateEndpoint(ctx, principal(c).ConsumerID, in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, resource.WebhookEndpointLocation(e.ID))
	return c.JSON(http.StatusCreated, resource.Data{Data: resource.CreatedWebhookEndpoint{WebhookEndpoint: e.Resource(), Secret: secret}})
}

// readObject reads a JSON object body (a form is one already: formBodies).
func readObject(c echo.Context) (map[string]json.RawMessage, error) {
	if err := checkJSONType(c); err != nil {
		return nil, err
	}
	b, err := readBody(c)
	if err != nil {
		return nil, err
	}
	return request.Object(b)
}

// listWebhookEndpoints is GET /api/webhook-endpoints: the caller's
// endpoints, oldest first, without their secrets.
func (s *Server) listWebhookEndpoints(c echo.Context) error {
	es, err := s.webhooks.ListEndpoints(c.Request().Context(), principal(c).ConsumerID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resource.Data{Data: resource.NewWebhookEndpoints(es)})
}

// showWebhookEndpoint is GET /api/webhook-endpoints/{id}: 404 for anything
// not the caller's.
func (s *Server) showWebhookEndpoint(c echo.Context) error {
	e, err := s.webhooks.GetEndpoint(c.Request().Context(), principal(c).ConsumerID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resource.Data{Data: e.Resource()})
}

// updateWebhookEndpoint is PATCH /api/webhook-endpoints/{id} with any of
// url, events and enabled (other fields are ignored, as Laravel ignores
// what its rules do not name): 200 with the endpoint as it is now.
// Enabling a disabled endpoint clears its disabling (app/webhooks).
func (s *Server) updateWebhookEndpoint(c echo.Context) error {
	ctx := c.Request().Context()
	consumer := principal(c).ConsumerID
	// Another's endpoint is 404 before its body is judged, as Laravel's
	// route model binding answers before the FormRequest's rules.
	if _, err := s.webhooks.GetEndpoint(ctx, consumer, c.Param("id")); err != nil {
		return err
	}
	raw, err := readObject(c)
	if err != nil {
		return err
	}
	p, typeErrs := request.BindPatchEndpoint(raw)
	if typeErrs != nil {
		return request.MergeFields(typeErrs, s.webhooks.CheckPatch(ctx, p), request.PatchEndpointRules)
	}
	e, err := s.webhooks.UpdateEndpoint(ctx, consumer, c.Param("id"), p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resource.Data{Data: e.Resource()})
}

// deleteWebhookEndpoint is DELETE /api/webhook-endpoints/{id}: 204, the
// endpoint gone with its deliveries and their attempts; nothing more is
// sent to it.
func (s *Server) deleteWebhookEndpoint(c echo.Context) error {
	if err := s.webhooks.DeleteEndpoint(c.Request().Context(), principal(c).ConsumerID, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// deliveriesQuery reads the deliveries' listing parameters
// (?status=&page=&per_page=), or the 422 of those that fail; the pager
// keeps status and a per_page that is not the default in its links.
func deliveriesQuery(c echo.Context, path string) (webhooks.DeliveryQuery, pager, error) {
	fields := map[string][]string{}
	q := webhooks.DeliveryQuery{Page: queryPage(c), PerPage: queryPerPage(c, defaultDeliveriesPerPage, fields), Status: c.QueryParam("status")}
	if q.Status != "" && !slices.Contains(webhooks.Statuses, q.Status) {
		fields["status"] = []string{"The selected status is invalid."}
	}
	if len(fields) > 0 {
		return q, pager{}, &fault.Fields{Fields: fields, Order: []string{"status", "per_page"}}
	}
	p := pager{path: path}
	if q.Status != "" {
		p.query += "status=" + url.QueryEscape(q.Status) + "&"
	}
	if q.PerPage != defaultDeliveriesPerPage {
		p.query += "per_page=" + strconv.Itoa(q.PerPage) + "&"
	}
	return q, p, nil
}

// listWebhookDeliveries is GET /api/webhook-endpoints/{id}/deliveries
// ?status=&page=&per_page=: the endpoint's deliveries, newest first, with
// their attempts, as Laravel's LengthAwarePaginator resource collection.
func (s *Server) listWebhookDeliveries(c echo.Context) error {
	ctx := c.Request().Context()
	consumer := principal(c).ConsumerID
	e, err := s.webhooks.GetEndpoint(ctx, consumer, c.Param("id"))
	if err != nil {
		return err
	}
	q, p, err := deliveriesQuery(c, s.baseURL+resource.WebhookEndpointLocation(e.ID)+"/deliveries")
	if err != nil {
		return err
	}
	q.ConsumerID, q.EndpointID = consumer, e.ID
	page, err := s.webhooks.Deliveries(ctx, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p.lengthAware(resource.NewWebhookDeliveries(page.Deliveries), len(page.Deliveries), q.Page, q.PerPage, page.Total))
}

// retryWebhookDelivery is POST /api/webhook-endpoints/{id}/deliveries/
// {delivery}/retry: the delivery due now, whatever its status, with a new
// retry window; 202 with it, as the attempt is still to come. One a
// worker is sending right now is 409 delivery_in_progress.
func (s *Server) retryWebhookDelivery(c echo.Context) error {
	v, err := s.webhooks.RetryDelivery(c.Request().Context(), actor(c), principal(c).ConsumerID, c.Param("id"), c.Param("delivery"))
	if err != nil {
		return err
	}
	s.log.Info("webhook delivery retried", "delivery", v.ID, "endpoint", v.EndpointID, "token_id", principal(c).TokenID, "request_id", RequestID(c))
	return c.JSON(http.StatusAccepted, resource.Data{Data: resource.NewWebhookDelivery(v)})
}

// retryAnyWebhookDelivery is POST /api/webhook-deliveries/{delivery}/retry:
// any consumer's delivery sent again, as retryWebhookDelivery sends a
// consumer's own, for an operator (intents:manage, as the list of every
// consumer's deliveries); the retry is in the audit trail as the operator's
// token.
func (s *Server) retryAnyWebhookDelivery(c echo.Context) error {
	v, err := s.webhooks.RetryDelivery(c.Request().Context(), actor(c), "", "", c.Param("delivery"))
	if err != nil {
		return err
	}
	s.log.Info("webhook delivery retried by an operator", "delivery", v.ID, "endpoint", v.EndpointID, "token_id", principal(c).TokenID,
		"request_id", RequestID(c))
	return c.JSON(http.StatusAccepted, resource.Data{Data: resource.NewWebhookDelivery(v)})
}

// listAllWebhookDeliveries is GET /api/webhook-deliveries?status=&consumer=
// &page=&per_page=: every consumer's deliveries, newest first, each naming
// its consumer, for an operator. consumer takes a consumer's name; an
// unknown one lists nothing.
func (s *Server) listAllWebhookDeliveries(c echo.Context) error {
	ctx := c.Request().Context()
	q, p, err := deliveriesQuery(c, s.baseURL+"/api/webhook-deliveries")
	if err != nil {
		return err
	}
	if name := c.QueryParam("consumer"); name != "" {
		p.query = "consumer=" + url.QueryEscape(name) + "&" + p.query
		consumer, err := s.auth.ConsumerNamed(ctx, name)
		if errors.Is(err, auth.ErrConsumerNotFound) {
			return c.JSON(http.StatusOK, p.lengthAware(resource.NewConsumerWebhookDeliveries(nil, nil), 0, q.Page, q.PerPage, 0))
		}
		if err != nil {
			return err
		}
		q.ConsumerID = consumer.ID
	}
	page, err := s.webhooks.Deliveries(ctx, q)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(page.Deliveries))
	for _, d := range page.Deliveries {
		if !slices.Contains(ids, d.ConsumerID) {
			ids = append(ids, d.ConsumerID)
		}
	}
	names := map[string]string{}
	if len(ids) > 0 {
		if names, err = s.auth.ConsumerNames(ctx, ids); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, p.lengthAware(resource.NewConsumerWebhookDeliveries(page.Deliveries, names), len(page.Deliveries), q.Page, q.PerPage, page.Total))
}
