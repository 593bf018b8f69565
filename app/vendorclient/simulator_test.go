package vendorclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
)

// TestSimulator429Burst: the first N requests get 429; the driver waits out
// each Retry-After (or backs off without one) and its create succeeds on the
// third call.
func TestSimulator429Burst(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter time.Duration
		wantWaits  []time.Duration
	}{
		{"with Retry-After", 1500 * time.Millisecond, []time.Duration{2 * time.Second, 2 * time.Second}},
		{"without Retry-After", 0, []time.Duration{500 * time.Millisecond, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, sim, clock := simulated(t, vendorclient.SimOptions{SimFaults: vendorclient.SimFaults{Burst429: 2, RetryAfter: tt.retryAfter}})
			if _, err := d.CreateSite(context.Background(), "Acme", "acme.test"); err != nil {
				t.Fatal(err)
			}
			if got := sim.Calls()["POST /sites"]; got != 3 {
				t.Errorf("POST /sites calls = %d, want 3", got)
			}
			if got := clock.Waits(); !reflect.DeepEqual(got, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", got, tt.wantWaits)
			}
			if got := len(sim.Sites()); got != 1 {
				t.Errorf("the simulator holds %d sites, want 1", got)
			}
		})
	}
}

// TestSimulatorDropCreates: the create is committed and its answer lost, so
// the driver says uncertain; the site exists, and the next EnsureSite adopts
// it with a single list.
func TestSimulatorDropCreates(t *testing.T) {
	for _, mode := range []string{vendorclient.DropClose, vendorclient.DropHang} {
		t.Run(mode, func(t *testing.T) {
			sim, err := vendorclient.NewSimulator(vendorclient.SimOptions{SimFaults: vendorclient.SimFaults{DropCreates: 1, DropMode: mode}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			cfg := testConfig(srv.URL)
			cfg.Timeout = 100 * time.Millisecond // hang mode holds the answer until this passes
			d, _, _ := newDriver(t, cfg)
			ctx := context.Background()

			_, _, err = licenses.EnsureSite(ctx, d, "Acme", "acme.test")
			wantClass(t, err, licenses.ErrVendorUncertain)
			sites := sim.Sites()
			if len(sites) != 1 {
				t.Fatalf("the simulator holds %d sites, want the 1 it committed", len(sites))
			}

			site, created, err := licenses.EnsureSite(ctx, d, "Acme", "acme.test")
			if err != nil || created || site.ID != sites[0].ID {
				t.Errorf("second EnsureSite = %s, created %v, %v; want %s adopted", site.ID, created, err, sites[0].ID)
			}
			if got, want := sim.Calls(), map[string]int{"GET /sites": 2, "POST /sites": 1}; !reflect.DeepEqual(got, want) {
				t.Errorf("calls = %v, want %v", got, want)
			}
		})
	}
}

// TestSimulatorDropDeletes: the delete is committed and its answer lost, so
// the driver says uncertain; the site is gone, and the next delete is the
// vendor's 404, which the driver counts as done. A drop only counts a delete
// of a site the simulator holds, and creates are not dropped by it.
func TestSimulatorDropDeletes(t *testing.T) {
	for _, mode := range []string{vendorclient.DropClose, vendorclient.DropHang} {
		t.Run(mode, func(t *testing.T) {
			sim, err := vendorclient.NewSimulator(vendorclient.SimOptions{SimFaults: vendorclient.SimFaults{DropDeletes: 1, DropMode: mode}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			cfg := testConfig(srv.URL)
			cfg.Timeout = 100 * time.Millisecond // hang mode holds the answer until this passes
			d, _, _ := newDriver(t, cfg)
			ctx := context.Background()

			if err := d.DeleteSite(ctx, "site_404"); err != nil {
				t.Fatalf("DeleteSite of a site it does not hold = %v, want the 404 as done", err)
			}
			site, err := d.CreateSite(ctx, "Acme", "acme.test")
			if err != nil {
				t.Fatalf("CreateSite = %v; --drop-deletes drops no create", err)
			}
			wantClass(t, d.DeleteSite(ctx, site.ID), licenses.ErrVendorUncertain)
			if got := len(sim.Sites()); got != 0 {
				t.Fatalf("the simulator holds %d sites, want the delete committed", got)
			}
			if err := d.DeleteSite(ctx, site.ID); err != nil {
				t.Errorf("second DeleteSite = %v, want the 404 as done", err)
			}
			if got, want := sim.Calls(), map[string]int{"POST /sites": 1, "DELETE /sites/{id}": 3}; !reflect.DeepEqual(got, want) {
				t.Errorf("calls = %v, want %v", got, want)
			}
		})
	}
}

// TestSimulator5xxRate: a 500 of the 5xx rate strikes before the work, so
// a create that got one did nothing; a rate of 1 fails every request.
func TestSimulator5xxRate(t *testing.T) {
	d, sim, _ := simulated(t, vendorclient.SimOptions{SimFaults: vendorclient.SimFaults{Rate5xx: 1}})
	ctx := context.Background()
	_, err := d.CreateSite(ctx, "Acme", "acme.test")
	wantClass(t, err, licenses.ErrVendorUncertain)
	if got := len(sim.Sites()); got != 0 {
		t.Errorf("the simulator holds %d sites after a 500 before the commit, want 0", got)
	}
	_, err = d.FindSite(ctx, "acme.test")
	wantClass(t, err, licenses.ErrVendorUnavailable)
}

// TestSimulatorChecksTheToken: with a token configured, another one is a 401
// (rejected, not retried); without one, any token is accepted.
func TestSimulatorChecksTheToken(t *testing.T) {
	tests := []struct {
		name     string
		simToken string
		want     error
	}{
		{"wrong token", "another-token", licenses.ErrVendorRejected},
		{"no token configured", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, sim, _ := simulated(t, vendorclient.SimOptions{Token: tt.simToken})
			_, err := d.FindSite(context.Background(), "acme.test")
			if tt.want == nil && err != nil {
				t.Fatalf("FindSite = %v, want nil", err)
			}
			if tt.want != nil {
				wantClass(t, err, tt.want)
			}
			if got := sim.Calls()["GET /sites"]; got != 1 {
				t.Errorf("GET /sites calls = %d, want 1", got)
			}
		})
	}
}

// TestSimulatorLatency: the latency is added to every request, so a driver
// with a shorter VENDOR_TIMEOUT gives up on it: a list is unavailable, a
// create uncertain. The simulator notices and ends the request too (else the
// server's Close would wait out the minute).
func TestSimulatorLatency(t *testing.T) {
	for call, want := range map[string]error{"list": licenses.ErrVendorUnavailable, "create": licenses.ErrVendorUncertain} {
		t.Run(call, func(t *testing.T) {
			sim, err := vendorclient.NewSimulator(vendorclient.SimOptions{SimFaults: vendorclient.SimFaults{Latency: time.Minute}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim)
			cfg := testConfig(srv.URL)
			cfg.Timeout = 50 * time.Millisecond
			d, _, _ := newDriver(t, cfg)

			wantClass(t, callVendor(context.Background(), d, call), want)
			start := time.Now()
			srv.Close() // waits for the simulator's handlers
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the simulator held the request for %s after the client gave up", took)
			}
			if got := len(sim.Sites()); got != 0 {
				t.Errorf("the simulator holds %d sites; a request that timed out in the latency did nothing", got)
			}
		})
	}
}

// TestSimulatorServesTheProtocol: the wire shapes the driver relies on,
// checked by hand: a list, a create with created_at, a malformed body.
func TestSimulatorServesTheProtocol(t *testing.T) {
	sim, err := vendorclient.NewSimulator(vendorclient.SimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, target, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, httptest.NewRequest(method, target, strings.NewReader(body)))
		return rec
	}
	tests := []struct {
		name, method, target, body string
		wantStatus                 int
		wantBody                   []string
	}{
		{"empty list", http.MethodGet, "/sites?domain=acme.test", "", 200, []string{`{"data":[]}`}},
		{"create", http.MethodPost, "/sites", `{"name":"Acme","domain":"acme.test"}`, 201,
			[]string{`"id":"site_1"`, `"license_key":"LK-`, `"status":"active"`, `"created_at":"`}},
		{"list finds it", http.MethodGet, "/sites?domain=acme.test", "", 200, []string{`"id":"site_1"`}},
		{"malformed JSON", http.MethodPost, "/sites", `{"name":`, 400, []string{`"message"`}},
		{"delete", http.MethodDelete, "/sites/site_1", "", 204, nil},
		{"delete again", http.MethodDelete, "/sites/site_1", "", 404, []string{`"message"`}},
	}
	for _, tt := range tests { // in order: each step builds on the last
		t.Run(tt.name, func(t *testing.T) {
			rec := do(tt.method, tt.target, tt.body)
			if rec.Code != tt.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(rec.Body.String(), want) {
					t.Errorf("body %s lacks %s", rec.Body, want)
				}
			}
		})
	}
}

// TestNewSimulatorRefusesNonsense: options outside their range are errors.
func TestNewSimulatorRefusesNonsense(t *testing.T) {
	for name, f := range map[string]vendorclient.SimFaults{
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
		opts := vendorclient.SimOptions{SimFaults: f}
		t.Run(name, func(t *testing.T) {
			if _, err := vendorclient.NewSimulator(opts); err == nil {
				t.Error("NewSimulator accepted it")
			}
		})
	}
}

// TestSimulatorListsAPageAtATime: GET /sites without a domain lists every
// site in id order a page at a time, with the page, the per_page in force
// and the total; with a domain it answers as it always has, without meta.
func TestSimulatorListsAPageAtATime(t *testing.T) {
	sim, err := vendorclient.NewSimulator(vendorclient.SimOptions{})
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
				ids = append(ids, strings.TrimPrefix(s.ID, "site_"))
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
		if body := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || !strings.HasPrefix(body, `{"data":[{"id":"site_3"`) ||
			!strings.HasSuffix(body, "}]}") || strings.Contains(body, "meta") {
			t.Errorf("GET %s = %d %s, want the domain's site and no meta", target, rec.Code, body)
		}
	}
}
