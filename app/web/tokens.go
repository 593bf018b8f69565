package web

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/resource"
)

// tokensPage is the tokens page's data: the list, its filter, the issue
// form, the newest events of the trail, and the token just issued (on the
// one answer that shows it).
type tokensPage struct {
	Consumer   string // the filter: a consumer's name
	Tokens     []tokenRow
	Form       issueForm
	Issued     *tokenRow // its Token the secret: rendered once, in the 201 of the POST that issued it, and never again
	Events     []tokenEventRow
	MoreEvents bool // the trail holds more than Events
}

// tokenRow is a token as the list shows it (the API's resource: never its
// secret), with what the page adds.
type tokenRow struct {
	resource.Token
	IssuerConsumer string // the issuing token's consumer's name, when it is on record
	Status         string // active, expired or revoked
	Own            bool   // the token of this session
	// Revocable is whether the session's token may revoke it
	// (auth.Revocable): a Revoke button is offered only then.
	Revocable bool
}

// issueForm is the issue form's input and what was wrong with it.
type issueForm struct {
	Consumer  string
	Name      string
	ExpiresIn string
	Abilities []abilityOption
	Errors    map[string][]string // by field: consumer, abilities, name, expires_in
	Refused   string              // the 403 of an ability the session may not grant
	// Once is the form's own value: sent once, it issues once (onceSet).
	Once string
}

// abilityOption is one checkbox of the issue form.
type abilityOption struct {
	Value    string
	ID       string // the checkbox's id, for its label
	Label    string
	Checked  bool
	NeedsAll bool // the session's token may not grant it (a * token may)
}

// abilityLabels say what each of auth.Known lets a token do.
var abilityLabels = map[string]string{
	auth.LicensesRead:   "read the consumer's licenses",
	auth.LicensesWrite:  "create and revoke the consumer's licenses",
	auth.WebhooksManage: "manage the consumer's webhook endpoints and deliveries",
	auth.TokensManage:   "operator: issue and revoke tokens",
	auth.IntentsManage:  "operator: intents, licenses and webhooks of every consumer",
	auth.All:            "operator: every ability",
}

// tokenFlashes are the notices a redirect to the tokens page may ask for.
var tokenFlashes = map[string]string{
	"revoked": "Token revoked: it is refused from its next request on, and every console session opened with it has ended.",
}

// tokenEventsShown is how many of the trail's newest events the tokens page
// shows; the events page has the rest.
const tokenEventsShown = 10

// tokens is GET /console/tokens[?consumer=NAME]: the tokens (as GET
// /api/tokens), the issue form and the newest events of the trail.
func (cn *Console) tokens(c visit) error {
	form := cn.newIssueForm(c.principal(), nil)
	return cn.renderTokens(c, http.StatusOK, c.QueryParam("consumer"), form, nil, tokenFlashes[c.QueryParam("done")])
}

// renderTokens writes the tokens page with status, listing the tokens of
// consumer ("" for all).
func (cn *Console) renderTokens(c visit, status int, consumer string, form issueForm, issued *tokenRow, flash string) error {
	ctx := c.Request().Context()
	toks, err := cn.cfg.Auth.List(ctx, consumer)
	if err != nil {
		return err
	}
	rows, err := cn.tokenRows(c, toks)
	if err != nil {
		return err
	}
	events, total, err := cn.cfg.Auth.Events(ctx, auth.TokenEventFilter{Page: 1, PerPage: tokenEventsShown})
	if err != nil {
		return err
	}
	p := tokensPage{Consumer: consumer, Tokens: rows, Form: form, Issued: issued,
		Events: tokenEventRows(events), MoreEvents: total > int64(len(events))}
	return cn.render(c, status, "tokens", view{Title: "Tokens", Section: "tokens", Flash: flash, Data: p})
}

// tokenRows is toks as the list shows them, each issuer named by its
// consumer: from toks when the issuer is among them, else from every token
// (a list filtered by consumer may not hold the issuers).
func (cn *Console) tokenRows(c visit, toks []auth.Token) ([]tokenRow, error) {
	consumerOf := make(map[string]string, len(toks))
	for _, t := range toks {
		consumerOf[t.ID] = t.Consumer.Name
	}
	for _, t := range toks {
		if _, known := consumerOf[deref(t.IssuedBy)]; t.IssuedBy != nil && !known {
			all, err := cn.cfg.Auth.List(c.Request().Context(), "")
			if err != nil {
				return nil, err
			}
			for _, t := range all {
				consumerOf[t.ID] = t.Consumer.Name
			}
			break
		}
	}
	now, p := cn.cfg.Now(), c.principal()
	rows := make([]tokenRow, 0, len(toks))
	for _, t := range toks {
		r := newTokenRow(t, now)
		r.IssuerConsumer, r.Own = consumerOf[deref(r.IssuedBy)], t.ID == p.TokenID
		r.Revocable = auth.Revocable(p.TokenID, p.Abilities, t) == nil
		rows = append(rows, r)
	}
	return rows, nil
}

// newTokenRow is t as the list shows it at now.
func newTokenRow(t auth.Token, now time.Time) tokenRow {
	r := tokenRow{Token: resource.NewToken(t), Status: "active"}
	switch {
	case t.RevokedAt != nil:
		r.Status = "revoked"
	case !now.Before(t.ExpiresAt):
		r.Status = "expired"
	}
	return r
}

// newIssueForm is the issue form with every known ability a checkbox,
// those in checked ticked, those p may not grant marked as needing a *
// token (they stay on the form: asking for one is a clear 403).
func (*Console) newIssueForm(p auth.Principal, checked []string) issueForm {
	f := issueForm{Once: randomToken()}
	for _, a := range auth.Known {
		f.Abilities = append(f.Abilities, abilityOption{Value: a, ID: "ability-" + abilityID(a), Label: abilityLabels[a],
			Checked: slices.Contains(checked, a), NeedsAll: !p.Abilities.CanGrant(a)})
	}
	return f
}

// abilityID is an ability as an element id: "licenses:read" is
// "licenses-read", "*" is "all".
func abilityID(a string) string {
	if a == auth.All {
		return "all"
	}
	return strings.ReplaceAll(a, ":", "-")
}

// revokeToken is POST /console/tokens/:id/revoke, as DELETE
// /api/tokens/{id}: the token is revoked by the session's token (in the
// audit trail as it), if that token may revoke it (auth.Revocable, else the
// 403 page; the list offers no button then); one revoked already changes
// nothing. Revoking the
// session's own token ends the session: the next page asks to sign in.
func (cn *Console) revokeToken(c visit) error {
	if err := cn.cfg.Auth.Revoke(c.Request().Context(), c.actor(), c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/tokens?done=revoked")
}
