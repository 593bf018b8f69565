package vendorclient_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
)

var created201 = respond(http.StatusCreated, `{"data":`+siteBody("site_1", "acme.test", "LK-1")+`}`)

// TestCreateHonoursBothRetryAfterForms: 429, 429, 201 is a success after
// waiting what the vendor asked, in seconds and as an HTTP date.
func TestCreateHonoursBothRetryAfterForms(t *testing.T) {
	clock := newClock()
	s := stub(t,
		respond(http.StatusTooManyRequests, "", "Retry-After", "2"),
		func(w http.ResponseWriter, r *http.Request) {
			// the clock has moved on by the 2 s waited: the date is 3 s past it
			date := clock.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
			respond(http.StatusTooManyRequests, "", "Retry-After", date)(w, r)
		},
		created201)
	d, _, _ := newDriver(t, testConfig(s.URL), vendorclient.WithClock(clock.Now), vendorclient.WithSleep(clock.Sleep))

	site, err := d.CreateSite(context.Background(), "Acme", "acme.test")
	if err != nil {
		t.Fatal(err)
	}
	if site.ID != "site_1" {
		t.Errorf("site = %s, want site_1", site.ID)
	}
	if got, want := clock.Waits(), []time.Duration{2 * time.Second, 3 * time.Second}; !reflect.DeepEqual(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
	s.assertSentCount(t, 3)
}

// TestRetryBudget: the 429 budget ends in an *UnavailableError carrying the
// vendor's last Retry-After, and a wait that would pass the budget or the
// context's deadline is never started.
func TestRetryBudget(t *testing.T) {
	rateLimited := func(retryAfter string) http.HandlerFunc {
		if retryAfter == "" {
			return respond(http.StatusTooManyRequests, "")
		}
		return respond(http.StatusTooManyRequests, "", "Retry-After", retryAfter)
	}
	repeat := func(n int, h http.HandlerFunc) []http.HandlerFunc {
		steps := make([]http.HandlerFunc, n)
		for i := range steps {
			steps[i] = h
		}
		return steps
	}
	tests := []struct {
		name           string
		tweak          func(*config.Vendor)
		deadline       time.Duration // 0: none
		realNow        bool          // read the real clock: the fake one starts at a truncated second, too coarse against a real deadline
		steps          []http.HandlerFunc
		wantWaits      []time.Duration
		wantRetryAfter time.Duration
	}{
		{
			name:           "attempts used up after RetryAttempts+1 calls",
			steps:          repeat(4, rateLimited("1")),
			wantWaits:      []time.Duration{time.Second, time.Second, time.Second},
			wantRetryAfter: time.Second,
		},
		{
			name:           "no retries configured: one call",
			tweak:          func(c *config.Vendor) { c.RetryAttempts = 0 },
			steps:          repeat(1, rateLimited("1")),
			wantRetryAfter: time.Second,
		},
		{
			name:           "a wait past VENDOR_RETRY_MAX_WAIT is not started",
			tweak:          func(c *config.Vendor) { c.RetryMaxWait = 3 * time.Second },
			steps:          repeat(2, rateLimited("2")),
			wantWaits:      []time.Duration{2 * time.Second},
			wantRetryAfter: 2 * time.Second,
		},
		{
			name:           "a wait past the context's deadline is not started",
			deadline:       2 * time.Second,
			steps:          repeat(1, rateLimited("5")),
			wantRetryAfter: 5 * time.Second,
		},
		{
			name:           "a wait that would leave the retried call under a second is not started",
			deadline:       2500 * time.Millisecond,
			realNow:        true,
			steps:          repeat(1, rateLimited("2")),
			wantRetryAfter: 2 * time.Second,
		},
		{
			name:      "no Retry-After: exponential backoff from VENDOR_RETRY_BASE",
			tweak:     func(c *config.Vendor) { c.RetryBase = 100 * time.Millisecond },
			steps:     repeat(4, rateLimited("")),
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := stub(t, tt.steps...)
			cfg := testConfig(s.URL)
			if tt.tweak != nil {
				tt.tweak(&cfg)
			}
			var opts []vendorclient.Option
			if tt.realNow {
				opts = append(opts, vendorclient.WithClock(time.Now))
			}
			d, clock, _ := newDriver(t, cfg, opts...)
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}

			_, err := d.CreateSite(ctx, "Acme", "acme.test")
			wantClass(t, err, licenses.ErrVendorUnavailable)
			var unavailable *licenses.UnavailableError
			if !errors.As(err, &unavailable) {
				t.Fatalf("err = %T, want *licenses.UnavailableError", err)
			}
			if unavailable.RetryAfter != tt.wantRetryAfter {
				t.Errorf("RetryAfter = %v, want the vendor's last %v", unavailable.RetryAfter, tt.wantRetryAfter)
			}
			if got := clock.Waits(); !reflect.DeepEqual(got, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", got, tt.wantWaits)
			}
			s.assertSentCount(t, len(tt.steps))
		})
	}
}

// TestBackoffJitterStaysWithinHalf: with the least jitter a backoff is half
// its step, never less; the retry then succeeds.
func TestBackoffJitterStaysWithinHalf(t *testing.T) {
	s := stub(t, respond(http.StatusTooManyRequests, ""), respond(http.StatusTooManyRequests, ""), created201)
	cfg := testConfig(s.URL)
	cfg.RetryBase = time.Second
	d, clock, _ := newDriver(t, cfg, vendorclient.WithJitter(func(time.Duration) time.Duration { return 0 }))

	if _, err := d.CreateSite(context.Background(), "Acme", "acme.test"); err != nil {
		t.Fatal(err)
	}
	if got, want := clock.Waits(), []time.Duration{500 * time.Millisecond, time.Second}; !reflect.DeepEqual(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
}

// TestCancelDuringWaitIsUnavailable: a caller who gives up while the driver
// waits out a 429 gets unavailable (nothing happened), and no second call.
func TestCancelDuringWaitIsUnavailable(t *testing.T) {
	s := stub(t, respond(http.StatusTooManyRequests, "", "Retry-After", "1"))
	d, _, _ := newDriver(t, testConfig(s.URL), vendorclient.WithSleep(func(context.Context, time.Duration) error { return context.Canceled }))

	_, err := d.CreateSite(context.Background(), "Acme", "acme.test")
	wantClass(t, err, licenses.ErrVendorUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want it to wrap context.Canceled", err)
	}
	s.assertSentCount(t, 1)
}
