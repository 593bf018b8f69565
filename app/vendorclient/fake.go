package vendorclient

import (
	"context"
	"crypto/rand"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// Fake is an in-memory vendor with one site per domain, safe for concurrent
// use. It answers as the vendor does: a name and a domain are required, and
// creating a site for a domain that already has one is a
// *licenses.RejectedError (422, "domain already has a site"). The tests hold
// it and the http driver talking to the simulator (package vendorsim) to one
// behaviour, so the fake the demos use and the vendor cannot drift apart.
type Fake struct {
	mu      sync.Mutex
	next    int               // the place of the last site created, for the order of creation
	sites   map[string]record // by id
	domains map[string]string // lower-cased domain → id
}

// record is a stored site and its place in the order of creation.
type record struct {
	site licenses.Site
	seq  int
}

var (
	_ licenses.Vendor     = (*Fake)(nil)
	_ licenses.SiteLister = (*Fake)(nil) // the drift check works against the fake too
)

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{sites: map[string]record{}, domains: map[string]string{}}
}

// FindSite returns the site for the domain (DNS names ignore case), or nil.
func (f *Fake) FindSite(ctx context.Context, domain string) (*licenses.Site, error) {
	if err := ctx.Err(); err != nil {
		return nil, &licenses.UnavailableError{Err: err}
	}
	r, ok := f.find(domain)
	if !ok {
		return nil, nil
	}
	return &r.site, nil
}

// CreateSite creates the domain's site, or refuses as the vendor would.
func (f *Fake) CreateSite(ctx context.Context, name, domain string) (licenses.Site, error) {
	if err := ctx.Err(); err != nil {
		return licenses.Site{}, &licenses.UnavailableError{Err: err}
	}
	r, rej := f.create(name, domain)
	if rej != nil {
		return licenses.Site{}, rej
	}
	return r.site, nil
}

// DeleteSite deletes the site; an unknown id is already gone, which is success.
func (f *Fake) DeleteSite(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return &licenses.UnavailableError{Err: err}
	}
	f.remove(id)
	return nil
}

// Sites returns every site, oldest first.
func (f *Fake) Sites() []licenses.Site {
	all := f.list("")
	sites := make([]licenses.Site, len(all))
	for i, r := range all {
		sites[i] = r.site
	}
	return sites
}

// ListSites returns page number page (from 1) of every site, oldest first,
// perPage to a page (vendorproto.MaxPerPage at most), and how many sites
// there are in all. A page past the last is empty. A page or a perPage below 1 is
// refused as the vendor refuses it: a *licenses.RejectedError (422).
func (f *Fake) ListSites(ctx context.Context, page, perPage int) ([]licenses.Site, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, &licenses.UnavailableError{Err: err}
	}
	recs, total, rej := f.page(page, perPage)
	if rej != nil {
		return nil, 0, rej
	}
	sites := make([]licenses.Site, len(recs))
	for i, r := range recs {
		sites[i] = r.site
	}
	return sites, total, nil
}

// page returns page number page of every site, oldest first, perPage (at
// most vendorproto.MaxPerPage) to a page, and the number of sites; or the
// vendor's refusal of a page or a perPage below 1.
func (f *Fake) page(page, perPage int) ([]record, int, *licenses.RejectedError) {
	fields := map[string][]string{}
	if page < 1 {
		fields["page"] = []string{"The page must be at least 1."}
	}
	if perPage < 1 {
		fields["per_page"] = []string{"The per page must be at least 1."}
	}
	if len(fields) > 0 {
		return nil, 0, &licenses.RejectedError{Status: http.StatusUnprocessableEntity, Message: "The given data was invalid.", Fields: fields}
	}
	perPage = min(perPage, vendorproto.MaxPerPage)
	all := f.list("")
	if page-1 >= (len(all)+perPage-1)/perPage { // past the last page; no overflow for a huge page
		return []record{}, len(all), nil
	}
	start := (page - 1) * perPage
	return all[start:min(start+perPage, len(all))], len(all), nil
}

func (f *Fake) find(domain string) (record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.sites[f.domains[strings.ToLower(domain)]]
	return r, ok
}

// list returns the sites of a domain, or all of them for "", oldest first.
func (f *Fake) list(domain string) []record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []record
	for _, r := range f.sites {
		if domain == "" || strings.EqualFold(r.site.Domain, domain) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b record) int { return a.seq - b.seq })
	return out
}

func (f *Fake) create(name, domain string) (record, *licenses.RejectedError) {
	if rej := validateSite(name, domain); rej != nil {
		return record{}, rej
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := strings.ToLower(domain)
	if _, taken := f.domains[key]; taken {
		return record{}, &licenses.RejectedError{
			Status:  http.StatusUnprocessableEntity,
			Message: "domain already has a site",
			Fields:  map[string][]string{"domain": {"The domain already has a site."}},
		}
	}
	f.next++
	r := record{
		site: licenses.Site{ID: newSiteID(), Name: name, Domain: domain,
			LicenseKey: "LK-" + rand.Text(), Status: vendorproto.StatusActive},
		seq: f.next,
	}
	f.sites[r.site.ID] = r
	f.domains[key] = r.site.ID
	return r, nil
}

func (f *Fake) remove(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.sites[id]
	if ok {
		delete(f.sites, id)
		delete(f.domains, strings.ToLower(r.site.Domain))
	}
	return ok
}

// newSiteID is a site id never given before, by this process or any other:
// "site_" and 128 random bits (26 base32 characters). The fake's sites live
// in its process; a counter from 1 gave site_1 again in the next process,
// so an id could name another domain's license.
func newSiteID() string { return "site_" + strings.ToLower(rand.Text()) }

// validateSite refuses a site without a name or a domain, as the vendor does.
func validateSite(name, domain string) *licenses.RejectedError {
	fields := map[string][]string{}
	if strings.TrimSpace(name) == "" {
		fields["name"] = []string{"The name field is required."}
	}
	if strings.TrimSpace(domain) == "" {
		fields["domain"] = []string{"The domain field is required."}
	}
	if len(fields) == 0 {
		return nil
	}
	return &licenses.RejectedError{Status: http.StatusUnprocessableEntity, Message: "The given data was invalid.", Fields: fields}
}
