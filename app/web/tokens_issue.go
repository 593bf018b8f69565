package web

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/request"
)

// issueToken is POST /console/tokens {consumer, abilities[], name,
// expires_in}, as POST /api/tokens and in its order: the session's token
// must be allowed to grant every ability asked for (auth.Grantable), else
// the form again with a 403 that names them; then the body's rules
// (request.BindIssueToken, the API's, reading the form as the API reads a
// form body); then auth's own checks (the consumer's name, the longest
// lifetime). A failing rule is the form again at 422, each error beside its
// field. A form is sent once: sent again (a reload of the answer, a double
// click), it is a 409 and issues nothing (onceSet). The new token is issued
// by the session's token and shown once, in
// this answer (201): the one POST that renders rather than redirects, as
// its secret may go in no URL and no flash. The console's responses are
// never cached (Cache-Control: no-store).
func (cn *Console) issueToken(c visit) error {
	raw, sent, err := issueFormObject(c)
	if err != nil {
		return err
	}
	p := c.principal()
	req, verr := request.BindIssueToken(raw, auth.Known)
	form := cn.newIssueForm(p, req.Abilities)
	form.Consumer, form.Name, form.ExpiresIn = sent.Get("consumer"), sent.Get("name"), sent.Get("expires_in")
	if !cn.forms.spend(c.FormValue("once")) {
		form.Refused = "This form was sent already, and issued its token then: it is in the list below (its secret was " +
			"shown once, in the answer to that first send). To issue another token, send the form below."
		return cn.renderTokens(c, http.StatusConflict, "", form, nil, "")
	}
	var ng *auth.NotGrantableError
	if err := auth.Grantable(p.Abilities, req.Abilities); errors.As(err, &ng) {
		form.Refused = ng.Explain()
		return cn.renderTokens(c, http.StatusForbidden, "", form, nil, "")
	}
	var fe interface{ FieldErrors() map[string][]string }
	if errors.As(verr, &fe) {
		form.Errors = issueFieldErrors(fe)
		return cn.renderTokens(c, http.StatusUnprocessableEntity, "", form, nil, "")
	}
	in := auth.IssueInput{Consumer: req.Consumer, Abilities: req.Abilities, Name: req.Name, TTL: req.TTL}
	issued, err := cn.cfg.Auth.Issue(c.Request().Context(), c.actor(), in)
	if errors.As(err, &fe) {
		form.Errors = issueFieldErrors(fe)
		return cn.renderTokens(c, http.StatusUnprocessableEntity, "", form, nil, "")
	}
	if err != nil {
		return err
	}
	row := newTokenRow(issued.Token, cn.cfg.Now())
	row.Token.Token = issued.Secret
	return cn.renderTokens(c, http.StatusCreated, "", cn.newIssueForm(p, nil), &row, "Token issued for "+issued.Consumer.Name+".")
}

// issueFormObject is the issue form as the one JSON object POST /api/tokens
// reads: the API's own reading of a form body (request.FormJSON:
// abilities[]=a&abilities[]=b is the array, bytes that are not UTF-8 kept
// for the rules to refuse), without the form's CSRF token; and the fields
// as they were sent, for the form shown again.
func issueFormObject(c echo.Context) (map[string]json.RawMessage, url.Values, error) {
	if _, err := c.FormParams(); err != nil { // the body, parsed once: PostForm holds it
		return nil, nil, err
	}
	form := make(url.Values, len(c.Request().PostForm))
	for k, v := range c.Request().PostForm {
		if k != "_token" && k != "once" {
			form[k] = v
		}
	}
	b, err := request.FormJSON("application/x-www-form-urlencoded", []byte(form.Encode()))
	if err != nil {
		return nil, nil, err
	}
	raw, err := request.Object(b)
	return raw, form, err
}

// issueFieldErrors are fe's errors by the form's fields, in rule order
// where fe knows it: an item's error (abilities.2) goes beside the
// abilities.
func issueFieldErrors(fe interface{ FieldErrors() map[string][]string }) map[string][]string {
	errs := fe.FieldErrors()
	order := slices.Sorted(maps.Keys(errs))
	if o, ok := fe.(interface{ FieldOrder() []string }); ok {
		order = o.FieldOrder()
	}
	out := make(map[string][]string, len(errs))
	for _, field := range order {
		key := field
		if strings.HasPrefix(field, "abilities.") {
			key = "abilities"
		}
		out[key] = append(out[key], errs[field]...)
	}
	return out
}
