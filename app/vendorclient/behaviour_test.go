package vendorclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/app/vendorsim"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
)

// testVendorBehaviour is what every licenses.Vendor must do.
func testVendorBehaviour(t *testing.T, newVendor func(t *testing.T) licenses.Vendor) {
	ctx := context.Background()
	t.Run("EnsureSite creates once, then adopts", func(t *testing.T) {
		v := newVendor(t)
		first, created, err := licenses.EnsureSite(ctx, v, "Acme", "acme.test")
		if err != nil || !created {
			t.Fatalf("first EnsureSite = %v, created %v; want a new site", err, created)
		}
		if first.ID == "" || first.LicenseKey == "" || first.Domain != "acme.test" || first.Name != "Acme" {
			t.Errorf("site = %+v, want an id, a key, its name and domain", first)
		}
		again, created, err := licenses.EnsureSite(ctx, v, "Acme", "acme.test")
		if err != nil || created || again != first {
			t.Errorf("second EnsureSite = %+v, created %v, %v; want %+v adopted", again, created, err, first)
		}
	})
	t.Run("FindSite is nil for an unknown domain", func(t *testing.T) {
		site, err := newVendor(t).FindSite(ctx, "nobody.test")
		if site != nil || err != nil {
			t.Errorf("FindSite = %v, %v; want nil, nil", site, err)
		}
	})
	t.Run("FindSite ignores the domain's case", func(t *testing.T) {
		v := newVendor(t)
		site := mustCreate(t, v, "acme.test")
		found, err := v.FindSite(ctx, "ACME.test")
		if err != nil || found == nil || found.ID != site.ID {
			t.Errorf("FindSite(ACME.test) = %v, %v; want %s", found, err, site.ID)
		}
	})
	t.Run("DeleteSite, then FindSite is nil", func(t *testing.T) {
		v := newVendor(t)
		site := mustCreate(t, v, "acme.test")
		if err := v.DeleteSite(ctx, site.ID); err != nil {
			t.Fatal(err)
		}
		if found, err := v.FindSite(ctx, "acme.test"); found != nil || err != nil {
			t.Errorf("FindSite after delete = %v, %v; want nil, nil", found, err)
		}
	})
	t.Run("DeleteSite twice is fine", func(t *testing.T) {
		v := newVendor(t)
		site := mustCreate(t, v, "acme.test")
		for i := range 2 {
			if err := v.DeleteSite(ctx, site.ID); err != nil {
				t.Errorf("delete %d = %v, want nil", i+1, err)
			}
		}
	})
	t.Run("RotateKey gives the site a new key; an unknown site is not found", func(t *testing.T) {
		v := newVendor(t)
		site := mustCreate(t, v, "acme.test")
		rotated, err := v.RotateKey(ctx, site.ID)
		if err != nil || rotated.ID != site.ID || rotated.LicenseKey == "" || rotated.LicenseKey == site.LicenseKey {
			t.Errorf("RotateKey = %+v, %v; want %s with a key other than %s", rotated, err, site.ID, site.LicenseKey)
		}
		if found, err := v.FindSite(ctx, "acme.test"); err != nil || found == nil || *found != rotated {
			t.Errorf("FindSite after RotateKey = %v, %v; want %+v", found, err, rotated)
		}
		_, err = v.RotateKey(ctx, "site_unknown")
		wantClass(t, err, licenses.ErrVendorRejected)
		if !errors.Is(err, licenses.ErrVendorSiteNotFound) {
			t.Errorf("RotateKey of an unknown site = %v, want not found", err)
		}
	})
	t.Run("CreateSite refuses a domain that has a site", func(t *testing.T) {
		v := newVendor(t)
		mustCreate(t, v, "acme.test")
		_, err := v.CreateSite(ctx, "Other", "acme.test")
		wantRejected(t, err, licenses.RejectedError{Status: 422, Message: "domain already has a site",
			Fields: map[string][]string{"domain": {"The domain already has a site."}}})
	})
	t.Run("CreateSite refuses a site without a name", func(t *testing.T) {
		_, err := newVendor(t).CreateSite(ctx, " ", "acme.test")
		wantRejected(t, err, licenses.RejectedError{Status: 422, Message: "The given data was invalid.",
			Fields: map[string][]string{"name": {"The name field is required."}}})
	})
}

func mustCreate(t *testing.T, v licenses.Vendor, domain string) licenses.Site {
	t.Helper()
	site, err := v.CreateSite(context.Background(), "Acme", domain)
	if err != nil {
		t.Fatalf("CreateSite(%s): %v", domain, err)
	}
	return site
}

func wantRejected(t *testing.T, err error, want licenses.RejectedError) {
	t.Helper()
	var got *licenses.RejectedError
	if !errors.As(err, &got) {
		t.Fatalf("err = %v, want *licenses.RejectedError", err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("rejection = %+v, want %+v", *got, want)
	}
}

// TestBehaviour: the driver is a vendor, on the simulator over a socket and
// served in process (the fake).
func TestBehaviour(t *testing.T) {
	t.Run("over a socket", func(t *testing.T) {
		testVendorBehaviour(t, func(t *testing.T) licenses.Vendor {
			d, _, _ := simulated(t, vendorsim.SimOptions{Token: testToken}, 0)
			return d
		})
	})
	t.Run("in process", func(t *testing.T) {
		testVendorBehaviour(t, func(t *testing.T) licenses.Vendor {
			d, _ := inProcess(t)
			return d
		})
	})
}

// inProcess is the fake as VENDOR_DRIVER=fake builds it: the http driver on
// a simulator served in this process.
func inProcess(t *testing.T) (*vendorclient.HTTPDriver, *vendorsim.Simulator) {
	t.Helper()
	sim, err := vendorsim.NewSimulator(vendorsim.SimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vendorclient.NewInProcess(sim, config.Vendor{}, nil), sim
}

// simulated starts a simulator with opts and returns an HTTPDriver for it,
// whose VENDOR_TIMEOUT is timeout (0: testConfig's).
func simulated(t *testing.T, opts vendorsim.SimOptions, timeout time.Duration) (*vendorclient.HTTPDriver, *vendorsim.Simulator, *testkit.Clock) {
	t.Helper()
	sim, err := vendorsim.NewSimulator(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL)
	if timeout > 0 {
		cfg.Timeout = timeout
	}
	d, clock, _ := newDriver(t, cfg)
	return d, sim, clock
}

// TestInProcessKeepsOneSitePerDomainUnderConcurrency: of many creates
// racing for one domain, exactly one wins; the others are refused as the
// vendor would.
func TestInProcessKeepsOneSitePerDomainUnderConcurrency(t *testing.T) {
	d, sim := inProcess(t)
	const racers = 16
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { _, errs[i] = d.CreateSite(context.Background(), "Acme", "acme.test") })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, licenses.ErrVendorRejected):
			t.Errorf("err = %v, want nil or rejected", err)
		}
	}
	if won != 1 || len(sim.Sites()) != 1 {
		t.Errorf("%d creates won and the simulator holds %d sites; want 1 and 1", won, len(sim.Sites()))
	}
}

// TestInProcessGivesNoAnswerToACallerThatGaveUp: a caller that already gave
// up gets unavailable, and nothing is created; one that gives up while the
// vendor holds its write gets uncertain, as over a socket.
func TestInProcessGivesNoAnswerToACallerThatGaveUp(t *testing.T) {
	d, sim := inProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.CreateSite(ctx, "Acme", "acme.test")
	wantClass(t, err, licenses.ErrVendorUnavailable)
	if got := len(sim.Sites()); got != 0 {
		t.Errorf("the simulator holds %d sites, want 0", got)
	}

	held := vendorclient.NewInProcess(http.HandlerFunc(hang), config.Vendor{Timeout: 50 * time.Millisecond}, nil)
	_, err = held.CreateSite(context.Background(), "Acme", "acme.test")
	wantClass(t, err, licenses.ErrVendorUncertain)
}
