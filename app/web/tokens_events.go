package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/resource"
)

// tokenEventsPerPage is the events page's page size (GET
// /api/tokens/events' default).
const tokenEventsPerPage = 50

// tokenEventRow is an event of the tokens' audit trail as the console shows
// it: the API's resource, and the event in a word ("issued", "revoked").
type tokenEventRow struct {
	resource.TokenEvent
	Action string
}

// tokenEventsPage is the events page's data.
type tokenEventsPage struct {
	TokenID string // the one token whose trail this is; "" for every token's
	Events  []tokenEventRow
	Pager   pager
}

// tokenEventRows is events as the console shows them.
func tokenEventRows(events []auth.TokenEvent) []tokenEventRow {
	out := make([]tokenEventRow, 0, len(events))
	for _, e := range resource.NewTokenEvents(events) {
		out = append(out, tokenEventRow{TokenEvent: e, Action: strings.TrimPrefix(e.Event, "token.")})
	}
	return out
}

// tokenEvents is GET /console/tokens/events?page=N, as GET
// /api/tokens/events: the tokens' audit trail, newest first: who issued
// and who revoked which token.
func (cn *Console) tokenEvents(c visit) error {
	return cn.renderTokenEvents(c, "", Prefix+"/tokens/events")
}

// tokenTrail is GET /console/tokens/:id/events: one token's trail; 404 when
// no event of it is on record (every token has its token.issued, so no such
// token was ever issued).
func (cn *Console) tokenTrail(c visit) error {
	id := c.Param("id")
	return cn.renderTokenEvents(c, id, Prefix+"/tokens/"+id+"/events")
}

func (cn *Console) renderTokenEvents(c echo.Context, tokenID, path string) error {
	page := queryPage(c)
	events, total, err := cn.cfg.Auth.Events(c.Request().Context(),
		auth.TokenEventFilter{TokenID: tokenID, Page: page, PerPage: tokenEventsPerPage})
	if err != nil {
		return err
	}
	if tokenID != "" && total == 0 {
		return auth.ErrTokenNotFound
	}
	p := tokenEventsPage{TokenID: tokenID, Events: tokenEventRows(events), Pager: newPager(path, nil, page, tokenEventsPerPage, total)}
	title := "Token events"
	if tokenID != "" {
		title = "Token " + tokenID + " events"
	}
	return cn.render(c, http.StatusOK, "token_events", view{Title: title, Section: "tokens", Data: p})
}
