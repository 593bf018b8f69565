package vendorsim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/licensor-api/licensor/app/vendorproto"
)

// handlers are the simulator's answers to the protocol's calls
// (vendorproto.Calls), by the call's name.
func (s *Simulator) handlers() map[string]func(*simCall) {
	return map[string]func(*simCall){
		vendorproto.ListSites.Name:  s.list,
		vendorproto.CreateSite.Name: s.create,
		vendorproto.DeleteSite.Name: s.delete,
		vendorproto.RotateKey.Name:  s.rotate,
	}
}

// list answers GET /sites?domain=D with the domain's sites, {"data":[…]};
// without a domain it lists every site a page at a time (listPage).
func (s *Simulator) list(c *simCall) {
	q := c.r.URL.Query()
	if !q.Has("domain") {
		s.listPage(c, q)
		return
	}
	sites := s.store.list(q.Get("domain"))
	if len(sites) == 1 {
		c.site = sites[0].ID
	}
	s.finish(c, http.StatusOK, vendorproto.SiteList{Data: sites}, "listed", false)
}

// listPage answers GET /sites?page=N&per_page=M, oldest first; either below 1
// or not a number is a 422.
func (s *Simulator) listPage(c *simCall, q url.Values) {
	page, perPage := 1, vendorproto.DefaultPerPage
	fields := map[string][]string{}
	for _, p := range []struct {
		name string
		n    *int
	}{{"page", &page}, {"per_page", &perPage}} {
		if !q.Has(p.name) {
			continue
		}
		n, err := strconv.Atoi(q.Get(p.name))
		if err != nil {
			fields[p.name] = []string{"The " + strings.ReplaceAll(p.name, "_", " ") + " must be an integer."}
		}
		*p.n = n
	}
	sites, total, rej := s.store.page(page, perPage)
	if len(fields) > 0 { // a number that is none refuses alone, before its range
		rej = invalid(fields)
	}
	if rej != nil {
		s.finish(c, rej.status, rej.body, "refused", false)
		return
	}
	meta := &vendorproto.PageMeta{Page: page, PerPage: min(perPage, vendorproto.MaxPerPage), Total: &total}
	s.finish(c, http.StatusOK, vendorproto.SitePage{Data: sites, Meta: meta}, "listed", false)
}

// create answers POST /sites: 201, or the vendor's 422 for a domain that
// already has a site (counted as a duplicate refused).
func (s *Simulator) create(c *simCall) {
	var in vendorproto.NewSite
	if err := json.Unmarshal(c.body, &in); err != nil {
		s.finish(c, http.StatusBadRequest, message("The body is not valid JSON."), "refused", false)
		return
	}
	rec, rej := s.store.create(in.Name, in.Domain)
	if rej != nil {
		if existing, ok := s.store.find(in.Domain); ok && rej.body.Message == duplicateMessage {
			c.site = existing.site.ID
			s.count(&s.stats.duplicates)
		}
		s.finish(c, rej.status, rej.body, "refused", false)
		return
	}
	c.site = rec.site.ID
	s.committed(&s.stats.creates)
	s.finish(c, http.StatusCreated, vendorproto.SiteData{Data: &rec.site}, "created",
		s.dropDue(&s.droppedCreates, c.faults.DropCreates))
}

// delete answers DELETE /sites/{id}: 204, or 404 for a site it does not hold.
func (s *Simulator) delete(c *simCall) {
	if _, err := s.store.take(c.r.PathValue("id")); err != nil {
		s.finish(c, http.StatusNotFound, message("Site not found."), "not found", false)
		return
	}
	s.committed(&s.stats.deletes)
	s.finish(c, http.StatusNoContent, nil, "deleted", s.dropDue(&s.droppedDeletes, c.faults.DropDeletes))
}

// rotate answers POST /sites/{id}/rotate-key: 200 with the site and its new
// license key, or 404 for a site it does not hold. The rotation sends the
// site.key_rotated event, as one on the vendor's own side does.
func (s *Simulator) rotate(c *simCall) {
	rec, err := s.store.rotate(c.r.PathValue("id"))
	if err != nil {
		s.finish(c, http.StatusNotFound, message("Site not found."), "not found", false)
		return
	}
	s.changed(vendorproto.EventSiteKeyRotated, rec)
	s.finish(c, http.StatusOK, vendorproto.SiteData{Data: &rec.site}, "rotated", false)
}

// finish answers a request whose work is done (done: "created", "deleted",
// "rotated", "listed", "refused", "not found"), unless a fault strikes after
// the work: the one its dice drew, or a drop its budget owes (drop).
func (s *Simulator) finish(c *simCall, status int, body any, done string, drop bool) {
	after := c.after
	if drop {
		after = faultDrop
	}
	switch after {
	case fault5xx:
		s.reply(c, http.StatusInternalServerError, message("Server Error"), done+", answered 500: "+c.why)
	case faultDrop:
		s.drop(c, done)
	default:
		s.reply(c, status, body, "")
	}
}

// drop loses the answer to a request (done: what was done first, "nothing
// done" before the work): it holds the request until the client gives up
// (hang), closes the connection (close), or answers 500 (5xx-after-commit).
func (s *Simulator) drop(c *simCall, done string) {
	mode := c.faults.DropMode
	if mode == Drop5xxAfterCommit {
		s.reply(c, http.StatusInternalServerError, message("Server Error"), done+", answer dropped: "+mode)
		return
	}
	s.logCall(c, 0, done+", answer dropped: "+mode)
	s.tally(c.route, statusDropped)
	if mode == DropHang {
		<-c.r.Context().Done()
		return
	}
	conn, _, err := http.NewResponseController(c.w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2 cannot hijack; aborting drops the stream just the same
	}
	_ = conn.Close() // dropping the answer is the point
}
