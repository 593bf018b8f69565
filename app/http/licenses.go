package http

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/internal/fault"
)

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
	page := queryPage(c)
	perPage := queryPerPage(c, defaultPerPage, fields)
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
		return &fault.Fields{Fields: fields, Order: []string{"per_page", "cursor"}}
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
		return c.JSON(http.StatusOK, p.cursorPaginated(resource.NewLicenses(cp.Licenses), cp.Licenses, cur, cp.More, perPage))
	}
	lp, err := s.licenses.List(ctx, consumer, page, perPage)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p.lengthAware(resource.NewLicenses(lp.Licenses), len(lp.Licenses), page, perPage, lp.Total))
}

// showLicense is GET /api/licenses/{id}: 404 for anything not the caller's.
func (s *Server) showLicense(c echo.Context) error {
	lic, err := s.licenses.Get(c.Request().Context(), principal(c).ConsumerID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resource.Data{Data: resource.NewLicense(lic)})
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
	trail, err := s.licenses.Events(c.Request().Context(), principal(c).ConsumerID, c.Param("id"))
	if err != nil {
		return err
	}
	out := make([]eventResource, 0, len(trail))
	for _, e := range trail {
		r := eventResource{Event: e.Event, Actor: e.Actor, RequestID: e.RequestID, TokenID: e.TokenID, CreatedAt: events.Time(e.CreatedAt)}
		if e.Actor != licenses.ActorRequest {
			r.RequestID = nil // the reconciler's and the vendor's: no request of the consumer's
		}
		out = append(out, r)
	}
	return c.JSON(http.StatusOK, resource.Data{Data: out})
}
