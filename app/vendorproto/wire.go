package vendorproto

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Call is one of the vendor's routes as licensor sends it: the one table
// every speaker of the protocol derives from (the http driver's requests,
// the simulator's routes and counts, the metrics' labels, the simulator's
// help). A new vendor call is one Call here and its place in Calls.
type Call struct {
	Name    string // how logs and metrics name it: "list", "create", …
	Method  string
	Pattern string // its path under VENDOR_URL, "{id}" standing for a site's id (an http.ServeMux pattern)
	OK      int    // the status of its success
	// Write marks a call that changes the vendor's sites. The vendor takes
	// no idempotency key, so a write whose answer was lost is uncertain
	// and is never sent again blindly.
	Write bool
	Doc   string // its body and answers, for help texts
}

// The vendor's calls. Doc speaks the wire, for people: the Go shapes are
// SiteList and SitePage (list), NewSite and SiteData (create), SiteData
// (rotate), and an ErrorBody for a refusal.
var (
	ListSites = Call{Name: "list", Method: http.MethodGet, Pattern: "/sites", OK: http.StatusOK,
		Doc: `?domain=D: the domain's sites, {"data":[site…]}; ?page=N&per_page=M: every site a page at a time, oldest first, ` +
			`with "meta" (page defaults to 1, per_page to ` + strconv.Itoa(DefaultPerPage) + `, at most ` + strconv.Itoa(MaxPerPage) + `; either below 1 is a 422)`}
	CreateSite = Call{Name: "create", Method: http.MethodPost, Pattern: "/sites", OK: http.StatusCreated, Write: true,
		Doc: `{"name","domain"}: {"data":site}; 422 when the domain already has a site, or the name or the domain is missing`}
	DeleteSite = Call{Name: "delete", Method: http.MethodDelete, Pattern: "/sites/{id}", OK: http.StatusNoContent, Write: true,
		Doc: `no body; 404 when it is already gone`}
	RotateKey = Call{Name: "rotate", Method: http.MethodPost, Pattern: "/sites/{id}/rotate-key", OK: http.StatusOK, Write: true,
		Doc: `no body: {"data":site} with a new license_key, and a ` + EventSiteKeyRotated + ` webhook; 404 for a site it does not hold`}
)

// Calls is every vendor call, in the order help texts list them.
var Calls = []Call{ListSites, CreateSite, DeleteSite, RotateKey}

// Route is the call as an http.ServeMux pattern and a stats key: "POST /sites".
func (c Call) Route() string { return c.Method + " " + c.Pattern }

// Path is the call's path for the site id, escaped.
func (c Call) Path(id string) string {
	return strings.Replace(c.Pattern, "{id}", url.PathEscape(id), 1)
}

// Help is the call in a line: "POST /sites (201): …".
func (c Call) Help() string { return c.Route() + " (" + strconv.Itoa(c.OK) + "): " + c.Doc }

// Site is a site as the vendor sends it.
type Site struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Domain     string `json:"domain"`
	LicenseKey string `json:"license_key"`
	Status     string `json:"status"`     // StatusActive or StatusSuspended
	CreatedAt  string `json:"created_at"` // RFC 3339, in seconds
}

// The statuses of a site.
const (
	StatusActive    = "active"
	StatusSuspended = "suspended"
)

// Paging of the list of every site (GET /sites without a domain).
const (
	DefaultPerPage = 100 // sites to a page when per_page is not given
	MaxPerPage     = 500 // the most sites to a page: a larger per_page gets this many
)

// SiteList is the answer to GET /sites?domain=D: {"data":[site…]}. A nil
// Data after decoding is an answer without its list (none, or null); an
// empty list decodes to an empty, non-nil Data.
type SiteList struct {
	Data []Site `json:"data"`
}

// SitePage is the answer to GET /sites?page=N&per_page=M:
// {"data":[site…],"meta":{"page","per_page","total"}}. A nil Data or Meta
// after decoding is an answer without it.
type SitePage struct {
	Data []Site    `json:"data"`
	Meta *PageMeta `json:"meta"`
}

// PageMeta is a SitePage's "meta".
type PageMeta struct {
	Page    int  `json:"page"`
	PerPage int  `json:"per_page"` // the per_page in force, after the cap
	Total   *int `json:"total"`    // a pointer: an answer without it is not a vendor with no sites
}

// NewSite is the body of POST /sites.
type NewSite struct {
	Name   string `json:"name"`
	Domain string `json:"domain"`
}

// SiteData is {"data":site}: the answer of a call that gives one site (a
// create's). A nil Data after decoding is an answer without it.
type SiteData struct {
	Data *Site `json:"data"`
}

// ErrorBody is the body of the vendor's refusals (4xx) and failures:
// {"message":…,"errors":{field:[…]}}, errors only when a field is at fault.
type ErrorBody struct {
	Message string              `json:"message"`
	Errors  map[string][]string `json:"errors,omitempty"`
}
