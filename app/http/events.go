package http

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/internal/fault"
)

// defaultEventsPerPage is the page size of GET /api/events without per_page.
const defaultEventsPerPage = 50

// eventsRules is the order of the feed's query rules.
var eventsRules = []string{"after", "type", "per_page"}

// errAfterInvalid is the message of an after that names none of the
// caller's events, as Laravel's exists rule words it.
const errAfterInvalid = "The selected after is invalid."

// eventsPage is a read of the feed: the events as their bodies are stored
// (the bytes a webhook sends), then where to resume.
type eventsPage struct {
	Data  []json.RawMessage `json:"data"`
	Links eventsLinks       `json:"links"`
	Meta  eventsMeta        `json:"meta"`
}

// eventsLinks is where the next page is: null when this one is the end of
// the feed for now.
type eventsLinks struct {
	Next *string `json:"next"`
}

// eventsMeta says whether more events follow now, and the after to send
// next: the page's last event, or the after asked with when the page is
// empty (null when that was none: the feed has nothing yet).
type eventsMeta struct {
	PerPage   int     `json:"per_page"`
	HasMore   bool    `json:"has_more"`
	NextAfter *string `json:"next_after"`
}

// listEvents is GET /api/events?after=&type=&per_page=: the caller's
// consumer events, oldest first in feed order (the order they were
// dispatched in, so a reader resuming after an event misses none), each
// exactly the body a webhook carries. An after that is none of the
// caller's events (unknown, pruned, another consumer's, or not an event
// id at all) is a 422 on after, like every other bad query parameter:
// the route exists, the parameter names nothing the caller may resume from.
func (s *Server) listEvents(c echo.Context) error {
	ctx := c.Request().Context()
	consumer := principal(c).ConsumerID
	fields := map[string][]string{}
	perPage := queryPerPage(c, defaultEventsPerPage, fields)
	types, ok := queryEventTypes(c.QueryParam("type"))
	if !ok {
		fields["type"] = []string{"The selected type is invalid."}
	}
	// An endpoint's events carry its URL, which only webhooks:manage reads:
	// a token without it reads the license events alone.
	if !principal(c).Abilities.Can(auth.WebhooksManage) {
		if slices.Contains(types, events.EndpointDisabled) {
			return errMissingAbility
		}
		if len(types) == 0 && ok {
			types = events.LicenseTypes
		}
	}
	after := strings.TrimSpace(c.QueryParam("after"))
	if after != "" && !isEventID(after) {
		fields["after"] = []string{errAfterInvalid}
	}
	if len(fields) > 0 {
		if _, bad := fields["after"]; !bad && after != "" {
			// Every rule is checked, as Laravel's validator runs them.
			known, err := s.events.Known(ctx, consumer, after)
			if err != nil {
				return err
			}
			if !known {
				fields["after"] = []string{errAfterInvalid}
			}
		}
		return &fault.Fields{Fields: fields, Order: eventsRules}
	}
	page, err := s.events.List(ctx, events.Query{ConsumerID: consumer, After: after, Types: types, Limit: perPage})
	if errors.Is(err, events.ErrNotFound) {
		return &fault.Fields{Fields: map[string][]string{"after": {errAfterInvalid}}}
	}
	if err != nil {
		return err
	}
	body := eventsPage{Data: page.Bodies, Meta: eventsMeta{PerPage: perPage, HasMore: page.More}}
	if body.Data == nil {
		body.Data = []json.RawMessage{}
	}
	if n := len(page.Events); n > 0 {
		body.Meta.NextAfter = &page.Events[n-1].ID
	} else if after != "" {
		body.Meta.NextAfter = &after
	}
	if page.More {
		p := pager{path: s.baseURL + "/api/events"}
		if len(types) > 0 {
			p.query += "type=" + url.QueryEscape(strings.Join(types, ",")) + "&"
		}
		if perPage != defaultEventsPerPage {
			p.query += "per_page=" + strconv.Itoa(perPage) + "&"
		}
		next := p.url("after", url.QueryEscape(*body.Meta.NextAfter))
		body.Links.Next = &next
	}
	return c.JSON(http.StatusOK, body)
}

// queryEventTypes reads ?type=: one event type or a comma list of them
// (spaces around each allowed, each kept once); empty is every type. ok is
// false when an item is no event type.
func queryEventTypes(raw string) ([]string, bool) {
	if strings.TrimSpace(raw) == "" {
		return nil, true
	}
	var types []string
	for t := range strings.SplitSeq(raw, ",") {
		t = strings.TrimSpace(t)
		if !events.IsType(t) {
			return nil, false
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	return types, true
}

// isEventID reports whether s can be an event's id: events.IDPrefix and a
// ULID (request.IsID). Anything else names no event, and is refused
// without a query.
func isEventID(s string) bool {
	rest, ok := strings.CutPrefix(s, events.IDPrefix)
	return ok && request.IsID(rest)
}
