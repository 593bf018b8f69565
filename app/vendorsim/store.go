package vendorsim

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// store holds the simulator's sites, one per domain (DNS names ignore
// case), safe for concurrent use. It refuses as the vendor does: a name
// and a domain are required, and a domain has one site at most.
type store struct {
	mu      sync.Mutex
	next    int               // the place of the last site created, for the order of creation
	sites   map[string]record // by id
	domains map[string]string // lower-cased domain → id
}

// record is a stored site, as the wire shows it, and its place in the
// order of creation.
type record struct {
	site vendorproto.Site
	seq  int
}

// refusal is the vendor's 4xx answer to a request: its status and body.
type refusal struct {
	status int
	body   vendorproto.ErrorBody
}

// invalid is the vendor's 422 refusal of the fields at fault.
func invalid(fields map[string][]string) *refusal {
	return &refusal{status: http.StatusUnprocessableEntity,
		body: vendorproto.ErrorBody{Message: "The given data was invalid.", Errors: fields}}
}

// duplicateMessage is the vendor's refusal of a domain that already has a site.
const duplicateMessage = "domain already has a site"

var (
	errNoSite    = errors.New("site not found")
	errUnchanged = errors.New("the site is already in that state")
)

func newStore() *store {
	return &store{sites: map[string]record{}, domains: map[string]string{}}
}

func (st *store) find(domain string) (record, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.sites[st.domains[strings.ToLower(domain)]]
	return r, ok
}

func (st *store) byID(id string) (record, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.sites[id]
	return r, ok
}

// list returns the sites of a domain, or all of them for "", oldest first.
func (st *store) list(domain string) []vendorproto.Site {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.listLocked(domain)
}

// listLocked needs st.mu held.
func (st *store) listLocked(domain string) []vendorproto.Site {
	if domain != "" && isASCII(domain) {
		// One site a domain, indexed lower-cased: for ASCII that is exactly
		// EqualFold, and a lookup by domain costs the same at any size.
		if id, ok := st.domains[strings.ToLower(domain)]; ok {
			return []vendorproto.Site{st.sites[id].site}
		}
		return []vendorproto.Site{}
	}
	var recs []record
	for _, r := range st.sites {
		if domain == "" || strings.EqualFold(r.site.Domain, domain) {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(a, b record) int { return a.seq - b.seq })
	out := make([]vendorproto.Site, len(recs))
	for i, r := range recs {
		out[i] = r.site
	}
	return out
}

// page returns page number page of every site, oldest first, perPage (at
// most vendorproto.MaxPerPage) to a page, and the number of sites; or the
// vendor's refusal of a page or a perPage below 1.
func (st *store) page(page, perPage int) ([]vendorproto.Site, int, *refusal) {
	fields := map[string][]string{}
	if page < 1 {
		fields["page"] = []string{"The page must be at least 1."}
	}
	if perPage < 1 {
		fields["per_page"] = []string{"The per page must be at least 1."}
	}
	if len(fields) > 0 {
		return nil, 0, invalid(fields)
	}
	perPage = min(perPage, vendorproto.MaxPerPage)
	all := st.list("")
	if page-1 >= (len(all)+perPage-1)/perPage { // past the last page; no overflow for a huge page
		return []vendorproto.Site{}, len(all), nil
	}
	start := (page - 1) * perPage
	return all[start:min(start+perPage, len(all))], len(all), nil
}

func (st *store) create(name, domain string) (record, *refusal) {
	if rej := validateSite(name, domain); rej != nil {
		return record{}, rej
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	key := strings.ToLower(domain)
	if _, taken := st.domains[key]; taken {
		return record{}, &refusal{status: http.StatusUnprocessableEntity, body: vendorproto.ErrorBody{
			Message: duplicateMessage,
			Errors:  map[string][]string{"domain": {"The domain already has a site."}},
		}}
	}
	st.next++
	r := record{
		site: vendorproto.Site{ID: newSiteID(), Name: name, Domain: domain,
			LicenseKey: "LK-" + rand.Text(), Status: vendorproto.StatusActive, CreatedAt: time.Now().UTC().Format(time.RFC3339)},
		seq: st.next,
	}
	st.sites[r.site.ID] = r
	st.domains[key] = r.site.ID
	return r, nil
}

// newSiteID is "site_" and 128 random bits: unique across restarts and
// deletes, as the vendor's ids are (a counter gave site_1 again).
func newSiteID() string { return "site_" + strings.ToLower(rand.Text()) }

func validateSite(name, domain string) *refusal {
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
	return invalid(fields)
}

func (st *store) take(id string) (record, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.sites[id]
	if !ok {
		return record{}, errNoSite
	}
	delete(st.sites, id)
	delete(st.domains, strings.ToLower(r.site.Domain))
	return r, nil
}

// setStatus sets the site's status and returns it after the change;
// errUnchanged when it had that status already.
func (st *store) setStatus(id, status string) (record, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.sites[id]
	switch {
	case !ok:
		return record{}, errNoSite
	case r.site.Status == status:
		return r, errUnchanged
	}
	r.site.Status = status
	st.sites[id] = r
	return r, nil
}

func (st *store) rotate(id string) (record, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.sites[id]
	if !ok {
		return record{}, errNoSite
	}
	r.site.LicenseKey = "LK-" + rand.Text()
	st.sites[id] = r
	return r, nil
}

func (st *store) snapshot() simState {
	st.mu.Lock()
	defer st.mu.Unlock()
	return simState{Next: st.next, Sites: st.listLocked("")}
}

func (st *store) restore(snap simState) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sites, st.domains, st.next = map[string]record{}, map[string]string{}, snap.Next
	for i, w := range snap.Sites {
		created, err := time.Parse(time.RFC3339, w.CreatedAt)
		if err != nil || w.ID == "" || w.Domain == "" {
			return fmt.Errorf("site %d (%q) is malformed", i+1, w.ID)
		}
		key := strings.ToLower(w.Domain)
		if _, dup := st.domains[key]; dup {
			return fmt.Errorf("two sites for domain %q", w.Domain)
		}
		w.CreatedAt = created.Format(time.RFC3339)
		st.sites[w.ID] = record{site: w, seq: i + 1 - len(snap.Sites)} // before any new site
		st.domains[key] = w.ID
		if n, err := strconv.Atoi(strings.TrimPrefix(w.ID, "site_")); err == nil && n > st.next {
			st.next = n // a hand-edited counter must not give an id twice
		}
	}
	return nil
}

// clear forgets every site; ids keep counting up.
func (st *store) clear() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sites, st.domains = map[string]record{}, map[string]string{}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
