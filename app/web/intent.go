package web

import (
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/resource"
)

// intentPage is the intent detail's data.
type intentPage struct {
	Intent       resource.Intent
	Timeline     []timelineEntry
	NamesLicense bool              // the intent's resource is a license
	License      *resource.License // that license, when it is still on record
	CanRetry     bool
	CanDiscard   bool
	RetryOnly    bool   // a failed intent of an operation that is retried, never discarded
	Reason       string // the discard form's reason, kept when it is refused
	Errors       map[string]string
}

// intentFlashes are the notices a redirect back to an intent may ask for
// (?done=…): a fixed set, never text from the query.
var intentFlashes = map[string]string{
	"retried":   "Intent retried: the reconciler takes it on its next pass.",
	"discarded": "Intent discarded: it is settled for good and will not be executed.",
}

// intent is GET /console/intents/:id: any consumer's intent, as GET
// /api/intents/{id} shows it, with its attempt history and its license.
func (cn *Console) intent(c visit) error {
	p, err := cn.intentPage(c, c.Param("id"))
	if err != nil {
		return err
	}
	return cn.renderIntent(c, http.StatusOK, p)
}

func (cn *Console) renderIntent(c echo.Context, status int, p intentPage) error {
	return cn.render(c, status, "intent", view{Title: "Intent " + p.Intent.ID, Section: "intents",
		Flash: intentFlashes[c.QueryParam("done")], Data: p})
}

// intentPage reads the intent id, its trail and its license.
func (cn *Console) intentPage(c echo.Context, id string) (intentPage, error) {
	ctx := c.Request().Context()
	in, err := cn.cfg.Intents.Intent(ctx, "", id)
	if err != nil {
		return intentPage{}, err
	}
	trail, _, err := cn.cfg.Intents.IntentEvents(ctx, id)
	if err != nil && !errors.Is(err, idempotency.ErrIntentNotFound) {
		return intentPage{}, err
	}
	names, err := cn.consumerNames(c, actorConsumers(in, trail)...)
	if err != nil {
		return intentPage{}, err
	}
	retryOnly := slices.Contains(cn.cfg.Operations.RetryOnly(), in.Operation)
	p := intentPage{Intent: resource.NewIntent(in, names[in.ConsumerID]), Timeline: timeline(in, trail, names),
		NamesLicense: in.ResourceType == "license" && in.ResourceID != "",
		CanRetry:     in.Status == idempotency.StatusFailed,
		CanDiscard:   slices.Contains(idempotency.Discardable, in.Status) && !retryOnly,
		RetryOnly:    in.Status == idempotency.StatusFailed && retryOnly}
	if !p.NamesLicense {
		return p, nil
	}
	lic, err := cn.cfg.Licenses.Find(ctx, in.ResourceID)
	if errors.Is(err, licenses.ErrNotFound) {
		return p, nil
	}
	if err != nil {
		return intentPage{}, err
	}
	l := resource.NewLicense(lic)
	p.License = &l
	return p, nil
}

// actorConsumers are the consumers the page names: the intent's, and each
// acting token's.
func actorConsumers(in idempotency.Intent, trail []audit.Event) []string {
	ids := []string{in.ConsumerID}
	for _, e := range trail {
		if e.ActorConsumerID != nil {
			ids = append(ids, *e.ActorConsumerID)
		}
	}
	return ids
}

// retryIntent is POST /console/intents/:id/retry: a failed intent back to
// pending for the reconciler, on behalf of the signed-in token, as POST
// /api/intents/{id}/retry does. Any other status is 409 intent_not_failed,
// the error page's.
func (cn *Console) retryIntent(c visit) error {
	in, err := cn.cfg.Intents.RetryFailed(c.Request().Context(), c.actor(), c.Param("id"), cn.cfg.Now())
	if err != nil {
		return err
	}
	cn.cfg.Log.Info("intent retried by an operator", "intent", in.ID, "token_id", c.principal().TokenID, "request_id", requestID(c))
	return c.Redirect(http.StatusSeeOther, intentPath(in.ID)+"?done=retried")
}

// discardIntent is POST /console/intents/:id/discard {reason}: a failed or
// abandoned intent settled for good, on behalf of the signed-in token, as
// POST /api/intents/{id}/discard does (the vendor asked first: a 503 page,
// nothing changed, when it cannot be). A reason that is refused shows the
// page again with the error beside the field (422); a status or operation
// that may not be discarded is 409 intent_not_discardable, the error
// page's. The reason goes to the audit trail only, never to a log line.
func (cn *Console) discardIntent(c visit) error {
	id, reason := c.Param("id"), c.FormValue("reason")
	in, err := cn.cfg.Guard.Discard(c.Request().Context(), c.actor(), id, reason)
	var invalid *audit.ValidationError
	if errors.As(err, &invalid) {
		p, perr := cn.intentPage(c, id)
		if perr != nil {
			return perr
		}
		p.Reason, p.Errors = reason, map[string]string{"reason": invalid.Fields["reason"][0]}
		return cn.renderIntent(c, http.StatusUnprocessableEntity, p)
	}
	if err != nil {
		return err
	}
	cn.cfg.Log.Info("intent discarded by an operator", "intent", in.ID, "token_id", c.principal().TokenID, "request_id", requestID(c))
	return c.Redirect(http.StatusSeeOther, intentPath(in.ID)+"?done=discarded")
}

// intentPath is the console's page of the intent id.
func intentPath(id string) string { return Prefix + "/intents/" + id }
