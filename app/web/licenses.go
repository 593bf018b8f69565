package web

import (
	"errors"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
)

// licensesPerPage is how many licenses a page of the search shows.
const licensesPerPage = 50

// maxDomainSearch is the longest domain part the search takes: a domain's
// longest.
const maxDomainSearch = 253

// licensesFilter is what the search's form asks for, as the query gave it.
type licensesFilter struct {
	Domain   string
	Consumer string
	Status   string
}

// licenseRow is one license of the search, as the API shows it, its
// consumer named.
type licenseRow struct {
	resource.License
	Consumer string
}

// licensesPage is the licenses search's data.
type licensesPage struct {
	Filter   licensesFilter
	Statuses []string
	Errors   map[string]string
	Rows     []licenseRow
	Pager    pager
}

// searchLicenses is GET /console/licenses?domain=&consumer=&status=&page=:
// any consumer's licenses, newest first, revoked ones included: a part of
// the domain, a consumer by name (a name nobody has finds nothing), a
// status. There is no operator's license route in the API; the page asks
// intents:manage, the operator's read of any consumer's records (as GET
// /api/intents and GET /api/webhook-deliveries do).
func (cn *Console) searchLicenses(c visit) error {
	f := licensesFilter{Domain: c.QueryParam("domain"), Consumer: c.QueryParam("consumer"), Status: c.QueryParam("status")}
	p := licensesPage{Filter: f, Statuses: licenses.Statuses, Pager: pager{Page: queryPage(c), LastPage: 1}}
	errs := map[string]string{}
	if f.Status != "" && !slices.Contains(licenses.Statuses, f.Status) {
		errs["status"] = "Choose one of the statuses listed."
	}
	if utf8.RuneCountInString(f.Domain) > maxDomainSearch {
		errs["domain"] = "A domain is at most 253 characters long."
	}
	status := http.StatusOK
	if len(errs) > 0 {
		p.Errors, status = errs, http.StatusUnprocessableEntity
	} else if err := cn.findLicenses(c, &p); err != nil {
		return err
	}
	return cn.render(c, status, "licenses", view{Title: "Licenses", Section: "licenses", Data: p})
}

// findLicenses fills p's rows and pager from the licenses' search.
func (cn *Console) findLicenses(c echo.Context, p *licensesPage) error {
	ctx := c.Request().Context()
	id, known, err := cn.consumerID(ctx, p.Filter.Consumer)
	if err != nil || !known {
		return err
	}
	q := licenses.SearchQuery{Domain: p.Filter.Domain, Status: p.Filter.Status, ConsumerID: id, Page: p.Pager.Page, PerPage: licensesPerPage}
	found, err := cn.cfg.Licenses.Search(ctx, q)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(found.Licenses))
	for _, l := range found.Licenses {
		ids = append(ids, l.ConsumerID)
	}
	names, err := cn.consumerNames(ctx, ids...)
	if err != nil {
		return err
	}
	for _, l := range found.Licenses {
		p.Rows = append(p.Rows, licenseRow{License: resource.NewLicense(l), Consumer: names[l.ConsumerID]})
	}
	filter := map[string]string{"domain": p.Filter.Domain, "consumer": p.Filter.Consumer, "status": p.Filter.Status}
	p.Pager = newPager(Prefix+"/licenses", filter, p.Pager.Page, licensesPerPage, found.Total)
	return nil
}

// licenseEventsShown is how many of a license's consumer events its page
// lists (the oldest first).
const licenseEventsShown = 100

// licensePage is one license's data.
type licensePage struct {
	License  licenses.License
	Once     string // the rotate form's own value: its Idempotency-Key
	Consumer string
	KeyTail  string // the license key's last characters; "" when it cannot be read
	Trail    []licenses.Event
	Events   []events.Event
	More     bool // the license has more consumer events than listed
}

// showLicense is GET /console/licenses/:id: any consumer's license, its key
// masked, its audit trail and its consumer events (their type, sequence and
// time; never their data, which carries the key).
func (cn *Console) showLicense(c visit) error {
	ctx := c.Request().Context()
	lic, err := cn.cfg.Licenses.Find(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	p := licensePage{License: lic, KeyTail: keyTail(lic.LicenseKey), Once: randomToken()}
	p.License.LicenseKey = "" // the page has the tail; the whole key goes no further
	if p.Trail, err = cn.cfg.Licenses.Events(ctx, lic.ConsumerID, lic.ID); err != nil {
		return err
	}
	if p.Events, err = cn.cfg.Events.ForSubject(ctx, lic.ConsumerID, lic.ID, licenseEventsShown+1); err != nil {
		return err
	}
	if len(p.Events) > licenseEventsShown {
		p.Events, p.More = p.Events[:licenseEventsShown], true
	}
	names, err := cn.consumerNames(ctx, lic.ConsumerID)
	if err != nil {
		return err
	}
	p.Consumer = names[lic.ConsumerID]
	return cn.render(c, http.StatusOK, "license", view{Title: "License " + lic.Domain, Section: "licenses",
		Flash: licenseFlashes[c.QueryParam("done")], Data: p})
}

// licenseFlashes are the notices a redirect back to a license may ask for
// (?done=…): a fixed set, never text from the query.
var licenseFlashes = map[string]string{
	"rotated": "Key rotated: the license holds the vendor's new key, and its consumer is told (license.key_rotated).",
	"pending": "The vendor's answer to the rotation was lost: the reconciler settles it (see the intents).",
}

// rotateKey is POST /console/licenses/:id/rotate-key: the license's key
// replaced at the vendor, on its consumer's behalf by the session's token,
// through the very operation and entry point of POST
// /api/licenses/{id}/rotate-key. The form's own value is its
// Idempotency-Key, so a form sent again replays its answer rather than
// rotate twice. A refusal is the error page's; an unknown outcome is the
// license again, with a notice that the reconciler settles it.
func (cn *Console) rotateKey(c visit) error {
	ctx := c.Request().Context()
	lic, err := cn.cfg.Licenses.Find(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	p := c.signed.principal
	_, _, err = cn.cfg.Guarded.RotateLicenseKey.Serve(ctx, cn.cfg.Guard, idempotency.Request{
		Caller: idempotency.Caller{ConsumerID: lic.ConsumerID, TokenID: p.TokenID, RequestID: requestID(c)},
		Method: http.MethodPost, Route: "/api/licenses/:id/rotate-key", Key: c.FormValue("once"),
	}, func([]byte) (string, []byte, error) { return lic.ID, request.LicenseIntent(lic.ID), nil })
	done := "rotated"
	var pending *idempotency.PendingError
	switch {
	case errors.As(err, &pending):
		done = "pending"
	case err != nil:
		return err
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"/licenses/"+lic.ID+"?done="+done)
}

// keyTail is the last four characters of a license key, never more than
// half of it: what an operator matches a key against without seeing it.
func keyTail(key string) string {
	r := []rune(key)
	return string(r[len(r)-min(4, len(r)/2):])
}
