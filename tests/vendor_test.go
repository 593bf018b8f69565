package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// vendor is a counting, scriptable stand-in for the upstream vendor, served
// by httptest: Laravel's Http::fake with Http::assertSentCount. By default it
// behaves like the real vendor (one site per domain); replies queued with
// script override that, one request at a time.
type vendor struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	sites  map[string]site // by domain
	calls  []string        // "GET /sites?domain=a.test", "POST /sites", …
	queued map[string][]reply
	nextID int
}

type site struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Domain     string `json:"domain"`
	LicenseKey string `json:"license_key"`
	Status     string `json:"status"`
}

// reply is one scripted answer. commit makes a create (or a delete) take effect before the
// reply is sent; hold, when set, blocks the reply until it is closed or the
// client gives up; entered, when set, is closed once the request has arrived.
type reply struct {
	status  int
	body    string
	header  map[string]string
	commit  bool
	hold    chan struct{}
	entered chan struct{}
}

func newVendor(t *testing.T) *vendor {
	t.Helper()
	v := &vendor{t: t, sites: map[string]site{}, queued: map[string][]reply{}}
	v.srv = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.srv.Close)
	return v
}

// script queues replies for a call ("GET", "POST" or "DELETE").
func (v *vendor) script(method string, replies ...reply) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queued[method] = append(v.queued[method], replies...)
}

// count returns how many calls of the method were made ("" for all).
func (v *vendor) count(method string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, c := range v.calls {
		if method == "" || strings.HasPrefix(c, method+" ") {
			n++
		}
	}
	return n
}

// siteCount returns how many sites the vendor holds.
func (v *vendor) siteCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.sites)
}

// addSite gives the vendor a site, as if an earlier attempt had created it.
func (v *vendor) addSite(name, domain string) site {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.create(name, domain)
}

func (v *vendor) create(name, domain string) site {
	v.nextID++
	s := site{ID: fmt.Sprintf("site_%d", v.nextID), Name: name, Domain: domain,
		LicenseKey: fmt.Sprintf("LK-%d-%s", v.nextID, strings.ReplaceAll(domain, ".", "-")), Status: "active"}
	v.sites[domain] = s
	return s
}

func (v *vendor) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer vendor-secret-token" {
		http.Error(w, `{"message":"Unauthenticated."}`, http.StatusUnauthorized)
		return
	}
	var in site
	if r.Method == http.MethodPost {
		_ = json.NewDecoder(r.Body).Decode(&in)
	}
	v.mu.Lock()
	v.calls = append(v.calls, r.Method+" "+r.URL.RequestURI())
	var rep *reply
	if q := v.queued[r.Method]; len(q) > 0 {
		rep, v.queued[r.Method] = &q[0], q[1:]
	}
	if rep != nil && rep.commit {
		switch r.Method {
		case http.MethodPost:
			if id, ok := rotateKeyID(r); ok {
				v.rotate(id)
			} else {
				v.create(in.Name, in.Domain)
			}
		case http.MethodDelete:
			v.remove(strings.TrimPrefix(r.URL.Path, "/sites/"))
		}
	}
	v.mu.Unlock()

	if rep != nil {
		v.scripted(w, r, rep, in)
		return
	}
	v.normal(w, r, in)
}

func (v *vendor) scripted(w http.ResponseWriter, r *http.Request, rep *reply, in site) {
	if rep.entered != nil {
		close(rep.entered)
	}
	if rep.hold != nil {
		select {
		case <-rep.hold:
		case <-r.Context().Done():
			return
		}
	}
	if rep.status == 0 { // a held call released without a scripted answer behaves normally
		v.normal(w, r, in)
		return
	}
	for k, val := range rep.header {
		w.Header().Set(k, val)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_, _ = w.Write([]byte(rep.body))
}

// remove deletes the site with that id; false when there is none.
func (v *vendor) remove(id string) bool {
	for d, s := range v.sites {
		if s.ID == id {
			delete(v.sites, d)
			return true
		}
	}
	return false
}

// rotateKeyID is the site id of a POST /sites/{id}/rotate-key.
func rotateKeyID(r *http.Request) (string, bool) {
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/sites/"), "/rotate-key")
	return id, ok && r.Method == http.MethodPost
}

// rotate gives the site with that id a new key; false when there is none.
func (v *vendor) rotate(id string) (site, bool) {
	for d, s := range v.sites {
		if s.ID == id {
			v.nextID++
			s.LicenseKey = fmt.Sprintf("LK-%d-rotated", v.nextID)
			v.sites[d] = s
			return s, true
		}
	}
	return site{}, false
}

// normal is the real vendor's behaviour: one site per domain.
func (v *vendor) normal(w http.ResponseWriter, r *http.Request, in site) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sites" && !r.URL.Query().Has("domain"):
		// The paged list of every site, in id order (the drift check's).
		all := make([]site, 0, len(v.sites))
		for _, s := range v.sites {
			all = append(all, s)
		}
		slices.SortFunc(all, func(a, b site) int { return strings.Compare(a.ID, b.ID) })
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		perPage, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		page, perPage = max(page, 1), max(perPage, 1)
		from := min((page-1)*perPage, len(all))
		to := min(from+perPage, len(all))
		_ = json.NewEncoder(w).Encode(map[string]any{"data": all[from:to],
			"meta": map[string]int{"page": page, "per_page": perPage, "total": len(all)}})
	case r.Method == http.MethodGet && r.URL.Path == "/sites":
		list := []site{}
		if s, ok := v.sites[r.URL.Query().Get("domain")]; ok {
			list = append(list, s)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": list})
	case strings.HasSuffix(r.URL.Path, "/rotate-key"):
		id, _ := rotateKeyID(r)
		if s, ok := v.rotate(id); ok {
			_ = json.NewEncoder(w).Encode(map[string]any{"data": s})
			return
		}
		w.WriteHeader(http.StatusNotFound)
	case r.Method == http.MethodPost && r.URL.Path == "/sites":
		if _, ok := v.sites[in.Domain]; ok {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"message":"The domain already has a site.","errors":{"domain":["taken"]}}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"data": v.create(in.Name, in.Domain)})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/sites/"):
		if v.remove(strings.TrimPrefix(r.URL.Path, "/sites/")) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}
