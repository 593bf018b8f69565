package http

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/resource"
	"github.com/licensor-api/licensor/internal/fault"
)

// operationLocation is where a consumer asks about an intent.
func operationLocation(id string) string { return "/api/operations/" + id }

// showOperation is GET /api/operations/{id}: the caller's own intent, the
// one a 202 named; anyone else's is 404.
func (s *Server) showOperation(c echo.Context) error {
	in, err := s.store.Intent(c.Request().Context(), principal(c).ConsumerID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resource.Data{Data: resource.NewOperation(in)})
}

type intentsPage struct {
	Data []resource.Intent `json:"data"`
	Meta pageMeta          `json:"meta"`
}

// maxOlderThan is the longest older_than GET /api/intents takes: a year.
const maxOlderThan = 8760 * time.Hour

// listIntents is GET /api/intents?status=&operation=&older_than=&consumer=
// &page=&per_page=, oldest first. consumer takes a consumer's name; an
// unknown one lists nothing. operation is one of the guard's operations, by
// name; older_than (a Go duration, 15m or 2h, up to 8760h) lists the
// intents created before now less it.
func (s *Server) listIntents(c echo.Context) error {
	fields := map[string][]string{}
	page := queryPage(c)
	perPage := queryPerPage(c, 50, fields)
	status := c.QueryParam("status")
	if status != "" && !slices.Contains(idempotency.Statuses, status) {
		fields["status"] = []string{"The selected status is invalid."}
	}
	operation := c.QueryParam("operation")
	if operation != "" && !slices.Contains(s.guard.Operations().Names(), operation) {
		fields["operation"] = []string{"The selected operation is invalid."}
	}
	var before time.Time
	if raw := c.QueryParam("older_than"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d <= 0 || d > maxOlderThan {
			fields["older_than"] = []string{"The older than field must be a positive duration of at most 8760h, such as 15m or 2h."}
		} else {
			before = s.now().UTC().Add(-d)
		}
	}
	if len(fields) > 0 {
		return &fault.Fields{Fields: fields}
	}
	ctx := c.Request().Context()
	f := idempotency.IntentFilter{Status: status, Operation: operation, Before: before, Page: page, PerPage: perPage}
	body := intentsPage{Data: []resource.Intent{}, Meta: pageMeta{CurrentPage: page, PerPage: perPage, LastPage: 1}}
	if name := c.QueryParam("consumer"); name != "" {
		consumer, err := s.auth.ConsumerNamed(ctx, name)
		if errors.Is(err, auth.ErrConsumerNotFound) {
			return c.JSON(http.StatusOK, body)
		}
		if err != nil {
			return err
		}
		f.ConsumerID = consumer.ID
	}
	intents, total, err := s.store.Intents(ctx, f)
	if err != nil {
		return err
	}
	names, err := s.consumerNames(c, intents...)
	if err != nil {
		return err
	}
	body.Data = resource.NewIntents(intents, names)
	body.Meta.Total, body.Meta.LastPage = total, max(1, (total+int64(perPage)-1)/int64(perPage))
	return c.JSON(http.StatusOK, body)
}

func (s *Server) consumerNames(c echo.Context, intents ...idempotency.Intent) (map[string]string, error) {
	ids := make([]string, 0, len(intents))
	for _, in := range intents {
		ids = append(ids, in.ConsumerID)
	}
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	return s.auth.ConsumerNames(c.Request().Context(), ids)
}

// showIntent is GET /api/intents/{id}: any consumer's intent, for an operator.
func (s *Server) showIntent(c echo.Context) error {
	in, err := s.store.Intent(c.Request().Context(), "", c.Param("id"))
	if err != nil {
		return err
	}
	return s.renderIntent(c, in)
}

// retryIntent is POST /api/intents/{id}/retry: a failed intent back to
// pending, its attempts reset, for the reconciler's next pass, with its
// intent.retried audit event. Any other state is 409 intent_not_failed.
func (s *Server) retryIntent(c echo.Context) error {
	in, err := s.store.RetryFailed(c.Request().Context(), actor(c), c.Param("id"), s.now())
	if err != nil {
		return err
	}
	s.log.Info("intent retried by an operator", "intent", in.ID, "token_id", principal(c).TokenID, "request_id", RequestID(c))
	return s.renderIntent(c, in)
}

// discardIntentRequest is the body of POST /api/intents/{id}/discard.
type discardIntentRequest struct {
	Reason string `json:"reason"`
}

// discardIntent is POST /api/intents/{id}/discard {"reason":"…"}: a failed
// or abandoned intent settled for good, with its intent.discarded audit
// event and the reason (422 on reason unless it is 1 to 500 characters of
// valid UTF-8), once the vendor is known to keep nothing for it that nobody
// holds (503 vendor_unavailable, nothing changed, when it cannot be asked).
// Any other state is 409 intent_not_discardable. The reason
// goes to the audit trail only, never to a log line.
func (s *Server) discardIntent(c echo.Context) error {
	var req discardIntentRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	in, err := s.guard.Discard(c.Request().Context(), actor(c), c.Param("id"), req.Reason)
	if err != nil {
		return err
	}
	s.log.Info("intent discarded by an operator", "intent", in.ID, "token_id", principal(c).TokenID, "request_id", RequestID(c))
	return s.renderIntent(c, in)
}

func (s *Server) renderIntent(c echo.Context, in idempotency.Intent) error {
	names, err := s.consumerNames(c, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resource.Data{Data: resource.NewIntent(in, names[in.ConsumerID])})
}
