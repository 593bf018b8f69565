package http

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// licenseResource is a license as the API shows it.
type licenseResource struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Domain       string `json:"domain"`
	LicenseKey   string `json:"license_key"`
	Status       string `json:"status"`
	VendorSiteID string `json:"vendor_site_id"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`
}

func newLicenseResource(l licenses.License) licenseResource {
	return licenseResource{
		ID:           l.ID,
		Name:         l.Name,
		Domain:       l.Domain,
		LicenseKey:   l.LicenseKey,
		Status:       l.Status,
		VendorSiteID: l.VendorSiteID,
		CreatedAt:    formatTime(l.CreatedAt),
		UpdatedAt:    formatTime(l.UpdatedAt),
	}
}

// licenseLocation is the path of a license, as a 201's Location header.
func licenseLocation(id string) string { return "/api/licenses/" + id }

type storeLicenseRequest struct {
	Name   string `json:"name"`
	Domain string `json:"domain"`
}

// storeLicense is POST /api/licenses: 201 for a new license, 200 for a
// domain the consumer already holds. bindLicense has parsed and validated
// the request before the idempotency layer reserved its key.
func (s *Server) storeLicense(c echo.Context) error {
	in, _ := c.Get(ctxLicenseInput).(licenses.Input)
	lic, created, err := s.licenses.Create(actorContext(c), principal(c).ConsumerID, in)
	if err != nil {
		return err
	}
	idempotency.Describe(c, licenseOutcome(lic))
	resp, err := licenseResponse(lic, created)
	if err != nil {
		return err
	}
	if loc := resp.Headers[echo.HeaderLocation]; loc != "" {
		c.Response().Header().Set(echo.HeaderLocation, loc)
	}
	return c.JSONBlob(resp.Status, resp.Body)
}

// licenseResponse is the answer to a create: 201 with Location for a new
// license, 200 for one the consumer already held. The handler and the
// reconciler both render through it, so a reconciled intent replays the very
// bytes a normal success would have sent.
func licenseResponse(lic licenses.License, created bool) (idempotency.Response, error) {
	body, err := marshalJSON(dataBody{Data: newLicenseResource(lic)})
	if err != nil {
		return idempotency.Response{}, err
	}
	resp := idempotency.Response{
		Status:  http.StatusOK,
		Headers: map[string]string{echo.HeaderContentType: echo.MIMEApplicationJSON},
		Body:    body,
	}
	if created {
		resp.Status = http.StatusCreated
		resp.Headers[echo.HeaderLocation] = licenseLocation(lic.ID)
	}
	return resp, nil
}

func licenseOutcome(lic licenses.License) idempotency.Outcome {
	return idempotency.Outcome{ResourceType: "license", ResourceID: lic.ID, ExternalRef: lic.VendorSiteID}
}

// ctxLicenseInput is where bindLicense leaves the validated request.
const ctxLicenseInput = "licenses.input"

// bindLicense parses and validates a create, once, for the handler and for
// the fingerprint. The intent is the name and the normalised domain, so
// "ACME.test." and "acme.test" are one intent and extra fields a client adds
// do not make a retry a conflict. A request it refuses never reaches the
// idempotency store.
//
// Every field is checked, in rule order (name, then domain), and every
// failing field is reported, as Laravel's validator does: a value of the
// wrong JSON type is "The name field must be a string." and does not hide
// the other fields' errors.
func bindLicense(c echo.Context, body []byte) ([]byte, error) {
	if err := checkJSONType(c); err != nil {
		return nil, err
	}
	raw, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	typeErrs := map[string]string{}
	var req storeLicenseRequest
	for _, f := range []struct {
		name string
		dst  *string
	}{{"name", &req.Name}, {"domain", &req.Domain}} {
		if msg := stringField(raw, f.name, f.dst); msg != "" {
			typeErrs[f.name] = msg
		}
	}
	in, err := licenses.Validate(licenses.Input{Name: req.Name, Domain: req.Domain})
	if err == nil && len(typeErrs) == 0 {
		c.Set(ctxLicenseInput, in)
		return json.Marshal(storeLicenseRequest{Name: in.Name, Domain: in.Domain})
	}
	var verr *licenses.ValidationError
	if err != nil && !errors.As(err, &verr) {
		return nil, err
	}
	fields, order := map[string][]string{}, []string{}
	for _, name := range licenseRules {
		switch {
		case typeErrs[name] != "":
			fields[name] = []string{typeErrs[name]}
		case verr != nil && len(verr.Fields[name]) > 0:
			fields[name] = verr.Fields[name]
		default:
			continue
		}
		order = append(order, name)
	}
	return nil, validationError(fields, order...)
}

// licenseRules is the order of a create's validation rules.
var licenseRules = []string{"name", "domain"}

// pageMeta is the meta of the operators' intents listing.
type pageMeta struct {
	CurrentPage int   `json:"current_page"`
	PerPage     int   `json:"per_page"`
	Total       int64 `json:"total"`
	LastPage    int64 `json:"last_page"`
}

// defaultPerPage is the page size of GET /api/licenses without per_page.
const defaultPerPage = 15

// listLicenses is GET /api/licenses?page=&per_page=, or ?cursor=&per_page=.
// With page (or neither) it answers Laravel's LengthAwarePaginator resource
// collection; with cursor (empty for the first page) Laravel's
// CursorPaginator one, from a keyset query with no COUNT.
func (s *Server) listLicenses(c echo.Context) error {
	fields := map[string][]string{}
	page := queryInt(c, "page", 1, 1, 1<<31-1, fields)
	perPage := queryInt(c, "per_page", defaultPerPage, 1, 100, fields)
	cursorMode := c.QueryParams().Has("cursor")
	var cur *licenses.Cursor
	if raw := c.QueryParam("cursor"); raw != "" {
		if dec, ok := decodeCursor(raw); ok {
			cur = &dec
		} else {
			fields["cursor"] = []string{"The cursor field must be a cursor from a previous page's links or meta."}
		}
	}
	if len(fields) > 0 {
		return validationError(fields, "page", "per_page", "cursor")
	}
	p := pager{path: s.baseURL + "/api/licenses"}
	if perPage != defaultPerPage {
		// Laravel's ->appends('per_page', …): the links keep the page size.
		p.query = "per_page=" + strconv.Itoa(perPage) + "&"
	}
	ctx := c.Request().Context()
	consumer := principal(c).ConsumerID
	if cursorMode {
		cp, err := s.licenses.ListCursor(ctx, consumer, cur, perPage)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, p.cursorPaginated(licenseResources(cp.Licenses), cp.Licenses, cur, cp.More, perPage))
	}
	lp, err := s.licenses.List(ctx, consumer, page, perPage)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p.lengthAware(licenseResources(lp.Licenses), len(lp.Licenses), page, perPage, lp.Total))
}

func licenseResources(ls []licenses.License) []licenseResource {
	out := make([]licenseResource, 0, len(ls))
	for _, l := range ls {
		out = append(out, newLicenseResource(l))
	}
	return out
}

// queryInt reads an integer query parameter in [lo, hi], noting an error in
// fields when it is not one.
func queryInt(c echo.Context, name string, def, lo, hi int, fields map[string][]string) int {
	raw := c.QueryParam(name)
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		fields[name] = []string{"The " + name + " field must be an integer between " + strconv.Itoa(lo) + " and " + strconv.Itoa(hi) + "."}
		return def
	}
	return n
}

// showLicense is GET /api/licenses/{id}: 404 for anything not the caller's.
func (s *Server) showLicense(c echo.Context) error {
	lic, err := s.licenses.Get(c.Request().Context(), principal(c).ConsumerID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, dataBody{Data: newLicenseResource(lic)})
}

// revokeLicense is DELETE /api/licenses/{id}: 204, and 204 again. The
// idempotency layer guards it with the license id as the key, so the revoke
// is on the record before the vendor hears of it.
func (s *Server) revokeLicense(c echo.Context) error {
	id := c.Param("id")
	idempotency.Describe(c, idempotency.Outcome{ResourceType: "license", ResourceID: id})
	if err := s.licenses.Revoke(actorContext(c), principal(c).ConsumerID, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// actorContext is the request's context, naming the request and its token
// as the actor of what the licenses service records.
func actorContext(c echo.Context) context.Context {
	return licenses.WithActor(c.Request().Context(), licenses.Actor{Name: RequestID(c), TokenID: principal(c).TokenID})
}

// eventResource is one entry of a license's audit trail.
type eventResource struct {
	Event     string  `json:"event"`
	Actor     string  `json:"actor"`      // "request", "reconciler" or "vendor"
	RequestID *string `json:"request_id"` // the request that caused it, for actor "request"
	TokenID   *string `json:"token_id"`   // the token that asked
	CreatedAt string  `json:"created_at"`
}

// licenseEvents is GET /api/licenses/{id}/events: the caller's own
// license's audit trail, oldest first.
func (s *Server) licenseEvents(c echo.Context) error {
	events, err := s.licenses.Events(c.Request().Context(), principal(c).ConsumerID, c.Param("id"))
	if err != nil {
		return err
	}
	out := make([]eventResource, 0, len(events))
	for _, e := range events {
		r := eventResource{Event: e.Event, Actor: "request", RequestID: stringOrNil(e.Actor), TokenID: e.TokenID, CreatedAt: formatTime(e.CreatedAt)}
		if e.Actor == licenses.ActorReconciler || e.Actor == licenses.ActorVendor {
			r.Actor, r.RequestID = e.Actor, nil
		}
		out = append(out, r)
	}
	return c.JSON(http.StatusOK, dataBody{Data: out})
}
