package vendorproto

import "net/url"

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

// SiteData is {"data":site}: the answer to POST /sites (201) and to POST
// RotateKeyPath (200). A nil Data after decoding is an answer without it.
type SiteData struct {
	Data *Site `json:"data"`
}

// RotateKeyPath is the path under VENDOR_URL of a site's key rotation.
func RotateKeyPath(id string) string { return "/sites/" + url.PathEscape(id) + "/rotate-key" }

// ErrorBody is the body of the vendor's refusals (4xx) and failures:
// {"message":…,"errors":{field:[…]}}, errors only when a field is at fault.
type ErrorBody struct {
	Message string              `json:"message"`
	Errors  map[string][]string `json:"errors,omitempty"`
}
