package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/internal/fault"
)

// actor is who a request acts as in the audit trail: its authenticated
// token (and the token's consumer), never a header; the request id rides
// along as correlation only.
func actor(c echo.Context) audit.Actor {
	p := principal(c)
	return audit.ByToken(p.ConsumerID, p.TokenID, RequestID(c))
}

type tokenEventsPage struct {
	Data []resource.TokenEvent `json:"data"`
	Meta pageMeta              `json:"meta"`
}

// tokenEvents is GET /api/tokens/events?token=&page=&per_page=: the tokens'
// audit trail (issued, revoked), newest first; of one token with token (an
// unknown id lists nothing, and one no token can have is not looked up).
func (s *Server) tokenEvents(c echo.Context) error {
	fields := map[string][]string{}
	page := queryPage(c)
	perPage := queryPerPage(c, 50, fields)
	if len(fields) > 0 {
		return &fault.Fields{Fields: fields, Order: []string{"per_page"}}
	}
	body := tokenEventsPage{Data: []resource.TokenEvent{}, Meta: pageMeta{CurrentPage: page, PerPage: perPage, LastPage: 1}}
	token := c.QueryParam("token")
	if token != "" && !request.IsID(token) {
		return c.JSON(http.StatusOK, body)
	}
	events, total, err := s.auth.Events(c.Request().Context(), auth.TokenEventFilter{TokenID: token, Page: page, PerPage: perPage})
	if err != nil {
		return err
	}
	body.Meta.Total, body.Meta.LastPage = total, max(1, (total+int64(perPage)-1)/int64(perPage))
	body.Data = resource.NewTokenEvents(events)
	return c.JSON(http.StatusOK, body)
}

// intentEvents is GET /api/intents/{id}/events: the intent's audit trail
// (the reconciler's attempts, retried, discarded with its reason), oldest
// first; still listed once the intent itself is pruned. 404 when neither
// the intent nor an event of it is on record.
func (s *Server) intentEvents(c echo.Context) error {
	ctx := c.Request().Context()
	events, consumerID, err := s.store.IntentEvents(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(events)+1)
	if consumerID != "" {
		ids = append(ids, consumerID)
	}
	for _, e := range events {
		if e.ActorConsumerID != nil {
			ids = append(ids, *e.ActorConsumerID)
		}
	}
	names := map[string]string{}
	if len(ids) > 0 {
		if names, err = s.auth.ConsumerNames(ctx, ids); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, resource.Data{Data: resource.NewIntentEvents(events, names[consumerID], names)})
}
