package vendorsim_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/vendorsim"
)

// TestSimulatorServesTheProtocol: the wire shapes the driver relies on,
// checked by hand: a list, a create with created_at, a key rotation, a
// malformed body.
func TestSimulatorServesTheProtocol(t *testing.T) {
	sim := newSim(t, vendorsim.SimOptions{})
	id := ""                      // the created site's, which {id} stands for: ids are random
	for _, tt := range []struct { // in order: each step builds on the last
		name, method, target, body string
		wantStatus                 int
		wantBody                   []string
	}{
		{"empty list", http.MethodGet, "/sites?domain=acme.test", "", 200, []string{`{"data":[]}`}},
		{"create", http.MethodPost, "/sites", `{"name":"Acme","domain":"acme.test"}`, 201,
			[]string{`"id":"site_`, `"license_key":"LK-`, `"status":"active"`, `"created_at":"`}},
		{"list finds it", http.MethodGet, "/sites?domain=acme.test", "", 200, []string{`"id":"{id}"`}},
		{"rotate its key", http.MethodPost, "/sites/{id}/rotate-key", "", 200, []string{`{"data":{"id":"{id}"`, `"license_key":"LK-`}},
		{"malformed JSON", http.MethodPost, "/sites", `{"name":`, 400, []string{`"message"`}},
		{"delete", http.MethodDelete, "/sites/{id}", "", 204, nil},
		{"delete again", http.MethodDelete, "/sites/{id}", "", 404, []string{`"message"`}},
		{"rotate the key of a site gone", http.MethodPost, "/sites/{id}/rotate-key", "", 404, []string{`"message"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := ask(sim, tt.method, strings.ReplaceAll(tt.target, "{id}", id), tt.body, "")
			if w.status != tt.wantStatus {
				t.Errorf("status %d, want %d", w.status, tt.wantStatus)
			}
			if tt.name == "create" {
				id = createdID(t, w)
			}
			for _, want := range tt.wantBody {
				if want = strings.ReplaceAll(want, "{id}", id); !strings.Contains(w.body.String(), want) {
					t.Errorf("body %s lacks %s", w.body.String(), want)
				}
			}
		})
	}
}

// TestSiteIDsAreUniqueAcrossRestarts: a site id is never given twice, not
// even by a new simulator without a state file (the fake vendor of the next
// process): a counter from 1 gave site_1 again after a restart, and a
// webhook or drift check matching by that id reached another domain's
// license.
func TestSiteIDsAreUniqueAcrossRestarts(t *testing.T) {
	seen := map[string]bool{}
	for range 3 {
		sim := newSim(t, vendorsim.SimOptions{})
		for _, d := range []string{"a.test", "b.test"} {
			id := createdID(t, ask(sim, http.MethodPost, "/sites", createBody(d), ""))
			if !strings.HasPrefix(id, "site_") || len(id) < len("site_")+20 || seen[id] {
				t.Errorf("id %q: want site_ and a long random part, never given before", id)
			}
			seen[id] = true
		}
	}
}

// TestNewSimulatorRefusesNonsense: options outside their range are errors.
func TestNewSimulatorRefusesNonsense(t *testing.T) {
	for name, f := range map[string]vendorsim.SimFaults{
		"5xx rate above 1":    {Rate5xx: 1.5},
		"negative 429 rate":   {Rate429: -0.1},
		"drop rate NaN":       {DropRate: math.NaN()},
		"negative burst":      {Burst429: -1},
		"unknown drop mode":   {DropMode: "explode"},
		"unknown fault phase": {FaultPhase: "during"},
		"negative latency":    {Latency: -time.Second},
		"negative jitter":     {Jitter: -time.Second},
		"negative drop count": {DropCreates: -2},
		"negative deletes":    {DropDeletes: -1},
	} {
		opts := vendorsim.SimOptions{SimFaults: f}
		t.Run(name, func(t *testing.T) {
			if _, err := vendorsim.NewSimulator(opts); err == nil {
				t.Error("NewSimulator accepted it")
			}
		})
	}
}

// TestSimulatorListsAPageAtATime: GET /sites without a domain lists every
// site in id order a page at a time, with the page, the per_page in force
// and the total; with a domain it answers as it always has, without meta.
func TestSimulatorListsAPageAtATime(t *testing.T) {
	sim, err := vendorsim.NewSimulator(vendorsim.SimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/sites", strings.NewReader(fmt.Sprintf(`{"name":"Acme","domain":"s%d.test"}`, i))))
		if rec.Code != http.StatusCreated {
			t.Fatalf("create %d = %d", i, rec.Code)
		}
	}
	number := map[string]string{} // site id → n of sn.test: ids are random
	for _, site := range sim.Sites() {
		number[site.ID] = strings.TrimSuffix(strings.TrimPrefix(site.Domain, "s"), ".test")
	}
	type page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Meta *struct {
			Page    int `json:"page"`
			PerPage int `json:"per_page"`
			Total   int `json:"total"`
		} `json:"meta"`
	}
	for _, tt := range []struct {
		target                 string
		wantIDs                string
		wantPage, wantPerPage  int
		wantTotal, wantRefused int
	}{
		{"/sites", "1 2 3 4 5", 1, 100, 5, 0},
		{"/sites?page=1&per_page=2", "1 2", 1, 2, 5, 0},
		{"/sites?page=2&per_page=2", "3 4", 2, 2, 5, 0},
		{"/sites?page=3&per_page=2", "5", 3, 2, 5, 0},
		{"/sites?page=4&per_page=2", "", 4, 2, 5, 0},
		{"/sites?page=1&per_page=5", "1 2 3 4 5", 1, 5, 5, 0},
		{"/sites?page=2&per_page=5", "", 2, 5, 5, 0},
		{"/sites?page=2&per_page=4", "5", 2, 4, 5, 0},
		{"/sites?per_page=9999", "1 2 3 4 5", 1, 500, 5, 0},
		{"/sites?page=9223372036854775807&per_page=500", "", 9223372036854775807, 500, 5, 0},
		{"/sites?page=0", "", 0, 0, 0, 422},
		{"/sites?per_page=0", "", 0, 0, 0, 422},
		{"/sites?page=two", "", 0, 0, 0, 422},
	} {
		t.Run(tt.target, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.target, nil))
			if tt.wantRefused != 0 {
				if rec.Code != tt.wantRefused || !strings.Contains(rec.Body.String(), `"errors"`) {
					t.Errorf("= %d %s, want %d with errors", rec.Code, rec.Body, tt.wantRefused)
				}
				return
			}
			var p page
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != http.StatusOK || p.Meta == nil || p.Data == nil {
				t.Fatalf("= %d %s, want 200 with data and meta", rec.Code, rec.Body)
			}
			var ids []string
			for _, s := range p.Data {
				ids = append(ids, number[s.ID])
			}
			if got := strings.Join(ids, " "); got != tt.wantIDs {
				t.Errorf("sites %q, want %q", got, tt.wantIDs)
			}
			if m := *p.Meta; m.Page != tt.wantPage || m.PerPage != tt.wantPerPage || m.Total != tt.wantTotal {
				t.Errorf("meta %+v, want page %d, per_page %d, total %d", m, tt.wantPage, tt.wantPerPage, tt.wantTotal)
			}
		})
	}
	for _, target := range []string{"/sites?domain=s3.test", "/sites?domain=S3.TEST&page=2&per_page=1"} {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if body := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || !strings.HasPrefix(body, `{"data":[{"id":"`+idOf(t, sim, "s3.test")+`"`) ||
			!strings.HasSuffix(body, "}]}") || strings.Contains(body, "meta") {
			t.Errorf("GET %s = %d %s, want the domain's site and no meta", target, rec.Code, body)
		}
	}
}
