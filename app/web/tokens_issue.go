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
// expires_in}, checked as POST /api/tokens checks, in its order, each refusal
// the form again: abilities the session's token may not grant (403), the
// API's body rules, then auth's own (422, each error beside its field). A
// form sent again is a 409 that issues nothing (onceSet). The new token is
// shown once, in this 201: the one POST that renders rather than redirects,
// as its secret may go in no URL and no flash.
func (cn *Console) issueToken(c visit) error {
	raw, sent, err := issueFormObject(c)
	if err != nil {
		return err
	}
	p := c.signed.principal
	in, verr := request.BindIssueToken(raw)
	form := cn.newIssueForm(p, in.Abilities)
	form.Consumer, form.Name, form.ExpiresIn = sent.Get("consumer"), sent.Get("name"), sent.Get("expires_in")
	if !cn.forms.spend(c.FormValue("once")) {
		form.Refused = "This form was sent already, and issued its token then: it is in the list below (its secret was " +
			"shown once, in the answer to that first send). To issue another token, send the form below."
		return cn.renderTokens(c, http.StatusConflict, "", form, nil, "")
	}
	var ng *auth.NotGrantableError
	if err := auth.Grantable(p.Abilities, in.Abilities); errors.As(err, &ng) {
		form.Refused = ng.Explain()
		return cn.renderTokens(c, http.StatusForbidden, "", form, nil, "")
	}
	var fe interface{ FieldErrors() map[string][]string }
	if errors.As(verr, &fe) {
		form.Errors = issueFieldErrors(fe)
		return cn.renderTokens(c, http.StatusUnprocessableEntity, "", form, nil, "")
	}
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
