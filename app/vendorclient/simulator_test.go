package vendorclient_test

import (
	"context"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorsim"
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
			d, sim, clock := simulated(t, vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{Burst429: 2, RetryAfter: tt.retryAfter}}, 0)
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
	for _, mode := range []string{vendorsim.DropClose, vendorsim.DropHang} {
		t.Run(mode, func(t *testing.T) {
			// hang mode holds the answer until the driver's timeout passes
			d, sim, _ := simulated(t, vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{DropCreates: 1, DropMode: mode}}, 100*time.Millisecond)
			ctx := context.Background()

			_, _, err := licenses.EnsureSite(ctx, d, "Acme", "acme.test")
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
	for _, mode := range []string{vendorsim.DropClose, vendorsim.DropHang} {
		t.Run(mode, func(t *testing.T) {
			// hang mode holds the answer until the driver's timeout passes
			d, sim, _ := simulated(t, vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{DropDeletes: 1, DropMode: mode}}, 100*time.Millisecond)
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
	d, sim, _ := simulated(t, vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{Rate5xx: 1}}, 0)
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
			d, sim, _ := simulated(t, vendorsim.SimOptions{Token: tt.simToken}, 0)
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
			sim, err := vendorsim.NewSimulator(vendorsim.SimOptions{SimFaults: vendorsim.SimFaults{Latency: time.Minute}})
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
