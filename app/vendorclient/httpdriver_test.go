package vendorclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/app/vendorsim"
)

// TestEnsureSiteListsThenCreates: a new domain costs exactly two calls, a
// list then a create, each with the protocol's headers, whether VENDOR_URL
// ends in a slash or not.
func TestEnsureSiteListsThenCreates(t *testing.T) {
	for name, suffix := range map[string]string{"base URL without a slash": "", "base URL with a slash": "/"} {
		t.Run(name, func(t *testing.T) {
			s := stub(t,
				respond(http.StatusOK, `{"data":[]}`),
				respond(http.StatusCreated, `{"data":`+siteBody("site_7", "acme.test", "LK-abc")+`}`))
			d, _, _ := newDriver(t, testConfig(s.URL+"/v1"+suffix), vendorclient.WithUserAgent(testUserAgent))

			site, created, err := licenses.EnsureSite(context.Background(), d, "Acme", "acme.test")
			if err != nil {
				t.Fatal(err)
			}
			want := licenses.Site{ID: "site_7", Name: "Acme", Domain: "acme.test", LicenseKey: "LK-abc", Status: "active"}
			if site != want || !created {
				t.Errorf("EnsureSite = %+v, %v; want %+v, true", site, created, want)
			}
			s.assertSentCount(t, 2)
			calls := s.Sent()
			if got := calls[0].Method + " " + calls[0].Path + "?" + calls[0].Query; got != "GET /v1/sites?domain=acme.test" {
				t.Errorf("first call = %s, want GET /v1/sites?domain=acme.test", got)
			}
			if got := calls[1].Method + " " + calls[1].Path; got != "POST /v1/sites" {
				t.Errorf("second call = %s, want POST /v1/sites", got)
			}
			var body map[string]string
			if err := json.Unmarshal([]byte(calls[1].Body), &body); err != nil || !reflect.DeepEqual(body, map[string]string{"name": "Acme", "domain": "acme.test"}) {
				t.Errorf("create body = %s, want {name: Acme, domain: acme.test}", calls[1].Body)
			}
			assertHeaders(t, calls[0].Header, false, testUserAgent)
			assertHeaders(t, calls[1].Header, true, testUserAgent)
		})
	}
}

// testUserAgent is what the tests pass to WithUserAgent; the application
// passes licensor/<its build's version>.
const testUserAgent = "licensor/v9.9.9-test"

// assertHeaders checks the protocol's headers; ua is the User-Agent the
// driver was given ("licensor" without WithUserAgent).
func assertHeaders(t *testing.T, h http.Header, write bool, ua string) {
	t.Helper()
	want := map[string]string{
		"Authorization": "Bearer " + testToken,
		"Accept":        "application/json",
		"User-Agent":    ua,
		"Content-Type":  "",
	}
	if write {
		want["Content-Type"] = "application/json"
	}
	for name, value := range want {
		if got := h.Get(name); got != value {
			t.Errorf("%s = %q, want %q", name, got, value)
		}
	}
}

// TestEnsureSiteAdoptsExistingSite: a domain the vendor already has costs
// one call, and the site adopted is the first one whose domain is the one
// asked, whatever else the vendor lists.
func TestEnsureSiteAdoptsExistingSite(t *testing.T) {
	s := stub(t, respond(http.StatusOK, `{"data":[`+
		siteBody("site_1", "www.acme.test", "LK-1")+`,`+
		siteBody("site_2", "acme.test", "LK-2")+`,`+
		siteBody("site_3", "acme.test", "LK-3")+`]}`))
	d, _, _ := newDriver(t, testConfig(s.URL))

	site, created, err := licenses.EnsureSite(context.Background(), d, "Acme", "acme.test")
	if err != nil {
		t.Fatal(err)
	}
	if site.ID != "site_2" || created {
		t.Errorf("EnsureSite = %s, created %v; want site_2, adopted", site.ID, created)
	}
	s.assertSentCount(t, 1)
}

// TestRequestsEscapeTheirValues: the domain is query-escaped, the id
// path-escaped, so neither can change the request.
func TestRequestsEscapeTheirValues(t *testing.T) {
	s := stub(t, respond(http.StatusOK, `{"data":[]}`), respond(http.StatusNoContent, ""))
	d, _, _ := newDriver(t, testConfig(s.URL))
	ctx := context.Background()

	if site, err := d.FindSite(ctx, "a b&x=1.test"); err != nil || site != nil {
		t.Fatalf("FindSite = %v, %v; want nil, nil", site, err)
	}
	if err := d.DeleteSite(ctx, "../x y"); err != nil {
		t.Fatal(err)
	}
	calls := s.Sent()
	if got, want := calls[0].Query, "domain=a+b%26x%3D1.test"; got != want {
		t.Errorf("list query = %s, want %s", got, want)
	}
	if got, want := calls[1].Path, "/sites/..%2Fx%20y"; got != want {
		t.Errorf("delete path = %s, want %s", got, want)
	}
}

// TestDeleteSiteSucceedsOn204And404: a 404 means already gone, which is
// what the caller wanted.
func TestDeleteSiteSucceedsOn204And404(t *testing.T) {
	for _, status := range []int{http.StatusNoContent, http.StatusNotFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			s := stub(t, respond(status, ""))
			d, _, _ := newDriver(t, testConfig(s.URL))
			if err := d.DeleteSite(context.Background(), "site_9"); err != nil {
				t.Errorf("DeleteSite on %d = %v, want nil", status, err)
			}
			calls := s.Sent()
			if len(calls) != 1 || calls[0].Method != http.MethodDelete || calls[0].Path != "/sites/site_9" {
				t.Errorf("calls = %v, want one DELETE /sites/site_9", calls)
			}
			assertHeaders(t, calls[0].Header, true, "licensor") // a DELETE is a write, so it sends Content-Type; no WithUserAgent: the default
		})
	}
}

// TestSecretsStayOutOfLogs: at Debug, through successes, a 429, a 5xx and a
// rejection, neither VENDOR_TOKEN nor any license key reaches the log.
func TestSecretsStayOutOfLogs(t *testing.T) {
	s := stub(t,
		respond(http.StatusOK, `{"data":[`+siteBody("site_1", "acme.test", "LK-key-one")+`]}`),
		respond(http.StatusTooManyRequests, `{"message":"slow down"}`, "Retry-After", "1"),
		respond(http.StatusCreated, `{"data":`+siteBody("site_2", "beta.test", "LK-key-two")+`}`),
		respond(http.StatusInternalServerError, `{"message":"boom","license_key":"LK-key-three"}`),
		respond(http.StatusCreated, `{"data":{"id":"site_4","license_key":17}}`),
		respond(http.StatusUnprocessableEntity, `{"message":"no","errors":{"domain":["taken"]}}`))
	d, _, logs := newDriver(t, testConfig(s.URL))
	ctx := context.Background()

	var errs []error
	_, err := d.FindSite(ctx, "acme.test")
	errs = append(errs, err)
	for _, domain := range []string{"beta.test", "gamma.test", "delta.test", "eps.test"} {
		_, err := d.CreateSite(ctx, "X", domain)
		errs = append(errs, err)
	}
	if !strings.Contains(logs.String(), "vendor call") {
		t.Fatalf("the log has no vendor calls, so this test proves nothing:\n%s", logs)
	}
	for _, secret := range []string{testToken, "LK-key"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
		for _, err := range errs {
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("error %q holds %q", err, secret)
			}
		}
	}
}

// A create refused because a racing create made the domain's site is
// answered by adopting that site; when the second look fails, the refusal is
// not definite (a retry may adopt the site), so EnsureSite answers that the
// vendor is unavailable, never a 422 the client would take as final. A
// refusal the second look confirms (no site) stays a refusal.
func TestEnsureSiteRefusedCreateIsNotFinalUntilTheSecondLookSays(t *testing.T) {
	taken := respond(http.StatusUnprocessableEntity, `{"message":"domain already has a site","errors":{"domain":["taken"]}}`)
	t.Run("the second look fails", func(t *testing.T) {
		s := stub(t, respond(http.StatusOK, `{"data":[]}`), taken, respond(http.StatusInternalServerError, `{}`))
		d, _, _ := newDriver(t, testConfig(s.URL))
		_, _, err := licenses.EnsureSite(context.Background(), d, "Acme", "acme.test")
		if !errors.Is(err, licenses.ErrVendorUnavailable) || errors.Is(err, licenses.ErrVendorRejected) {
			t.Errorf("EnsureSite = %v, want vendor unavailable (retryable), not rejected", err)
		}
	})
	t.Run("the second look finds the site", func(t *testing.T) {
		s := stub(t, respond(http.StatusOK, `{"data":[]}`), taken, respond(http.StatusOK, `{"data":[`+siteBody("site_9", "acme.test", "LK-9")+`]}`))
		d, _, _ := newDriver(t, testConfig(s.URL))
		site, created, err := licenses.EnsureSite(context.Background(), d, "Acme", "acme.test")
		if err != nil || site.ID != "site_9" || created {
			t.Errorf("EnsureSite = %s, %v, %v; want site_9 adopted", site.ID, created, err)
		}
	})
	t.Run("the second look finds nothing: asked again", func(t *testing.T) {
		s := stub(t, respond(http.StatusOK, `{"data":[]}`), taken, respond(http.StatusOK, `{"data":[]}`),
			respond(http.StatusCreated, `{"data":`+siteBody("site_10", "acme.test", "LK-10")+`}`))
		d, _, _ := newDriver(t, testConfig(s.URL))
		site, created, err := licenses.EnsureSite(context.Background(), d, "Acme", "acme.test")
		if err != nil || site.ID != "site_10" || !created {
			t.Errorf("EnsureSite = %s, %v, %v; want site_10 created by the second ask (the domain's site was deleted in between)", site.ID, created, err)
		}
	})
	t.Run("refused for the domain again", func(t *testing.T) {
		empty := respond(http.StatusOK, `{"data":[]}`)
		s := stub(t, empty, taken, empty, taken, empty)
		d, _, _ := newDriver(t, testConfig(s.URL))
		if _, _, err := licenses.EnsureSite(context.Background(), d, "Acme", "acme.test"); !errors.Is(err, licenses.ErrVendorRejected) {
			t.Errorf("EnsureSite = %v, want the refusal: asked twice, refused twice", err)
		}
	})
	t.Run("refused for another field", func(t *testing.T) {
		s := stub(t, respond(http.StatusOK, `{"data":[]}`),
			respond(http.StatusUnprocessableEntity, `{"message":"invalid","errors":{"name":["invalid"]}}`), respond(http.StatusOK, `{"data":[]}`))
		d, _, _ := newDriver(t, testConfig(s.URL))
		if _, _, err := licenses.EnsureSite(context.Background(), d, "Acme", "acme.test"); !errors.Is(err, licenses.ErrVendorRejected) {
			t.Errorf("EnsureSite = %v, want the refusal", err)
		}
	})
}

// TestListSitesPages: the http driver (against the simulator) pages through
// every site: in id order, the total with each page, an empty page past the
// last, per_page capped at 500, and a page or per_page below 1 refused.
func TestListSitesPages(t *testing.T) {
	v, _, _ := simulated(t, vendorsim.SimOptions{Token: testToken}, 0)
	ctx := context.Background()
	var all []licenses.Site
	for _, domain := range []string{"a.test", "b.test", "c.test", "d.test", "e.test"} {
		all = append(all, mustCreate(t, v, domain))
	}
	for _, tt := range []struct {
		page, perPage int
		want          []licenses.Site
	}{
		{1, 2, all[0:2]}, {2, 2, all[2:4]}, {3, 2, all[4:5]}, {4, 2, []licenses.Site{}},
		{1, 5, all}, {2, 5, []licenses.Site{}}, {1, 100, all}, {1, 501, all},
	} {
		got, total, err := v.ListSites(ctx, tt.page, tt.perPage)
		if err != nil || total != 5 || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ListSites(%d, %d) = %v, %d, %v; want %v, 5", tt.page, tt.perPage, got, total, err, tt.want)
		}
	}
	for _, bad := range [][2]int{{0, 10}, {1, 0}, {-1, -1}} {
		_, _, err := v.ListSites(ctx, bad[0], bad[1])
		wantClass(t, err, licenses.ErrVendorRejected)
	}
	if err := v.DeleteSite(ctx, all[1].ID); err != nil {
		t.Fatal(err)
	}
	if got, total, err := v.ListSites(ctx, 1, 2); err != nil || total != 4 || !reflect.DeepEqual(got, []licenses.Site{all[0], all[2]}) {
		t.Errorf("after a delete: %v, %d, %v; want %v, 4", got, total, err, []licenses.Site{all[0], all[2]})
	}
}

// TestListSitesClassifiesFailures: ListSites asks GET /sites?page&per_page,
// rides out a 429, and classifies failures as FindSite does: a 4xx is
// rejected; a 5xx, no answer or a malformed one (no data, no meta.total, a
// site without a key) is unavailable, never uncertain.
func TestListSitesClassifiesFailures(t *testing.T) {
	ok := `{"data":[` + siteBody("site_3", "c.test", "LK-c") + `],"meta":{"page":2,"per_page":2,"total":3}}`
	s := stub(t, respond(http.StatusTooManyRequests, "", "Retry-After", "1"), respond(http.StatusOK, ok))
	d, _, _ := newDriver(t, testConfig(s.URL))
	sites, total, err := d.ListSites(context.Background(), 2, 2)
	if err != nil || total != 3 || len(sites) != 1 || sites[0].ID != "site_3" || sites[0].LicenseKey != "LK-c" {
		t.Fatalf("ListSites = %v, %d, %v", sites, total, err)
	}
	calls := s.Sent()
	if len(calls) != 2 || calls[1].Method != http.MethodGet || calls[1].Path != "/sites" || calls[1].Query != "page=2&per_page=2" {
		t.Errorf("calls %v, want GET /sites?page=2&per_page=2 twice", calls)
	}

	for name, tt := range map[string]struct {
		step http.HandlerFunc
		want error
	}{
		"422":               {respond(http.StatusUnprocessableEntity, `{"message":"The given data was invalid."}`), licenses.ErrVendorRejected},
		"500":               {respond(http.StatusInternalServerError, `{"message":"Server Error"}`), licenses.ErrVendorUnavailable},
		"connection closed": {reset, licenses.ErrVendorUnavailable},
		"not JSON":          {respond(http.StatusOK, `<html>`), licenses.ErrVendorUnavailable},
		"no data":           {respond(http.StatusOK, `{"meta":{"total":0}}`), licenses.ErrVendorUnavailable},
		"no meta":           {respond(http.StatusOK, `{"data":[]}`), licenses.ErrVendorUnavailable},
		"no total":          {respond(http.StatusOK, `{"data":[],"meta":{"page":1}}`), licenses.ErrVendorUnavailable},
		"a site without key": {respond(http.StatusOK, `{"data":[{"id":"site_1"}],"meta":{"total":1}}`),
			licenses.ErrVendorUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			s := stub(t, tt.step)
			d, _, _ := newDriver(t, testConfig(s.URL))
			_, _, err := d.ListSites(context.Background(), 1, 100)
			wantClass(t, err, tt.want)
		})
	}
}

// TestRotateKey: POST /sites/{id}/rotate-key, without a body, answers the
// site with its new key; a 429 is ridden out (two calls), and the vendor's
// 404 is not found, a definite refusal, asked once.
func TestRotateKey(t *testing.T) {
	s := stub(t, respond(http.StatusTooManyRequests, "", "Retry-After", "1"),
		respond(http.StatusOK, `{"data":`+siteBody("site_7", "acme.test", "LK-new")+`}`))
	d, _, _ := newDriver(t, testConfig(s.URL), vendorclient.WithUserAgent(testUserAgent))
	site, err := d.RotateKey(context.Background(), "site_7")
	if want := (licenses.Site{ID: "site_7", Name: "Acme", Domain: "acme.test", LicenseKey: "LK-new", Status: "active"}); err != nil || site != want {
		t.Errorf("RotateKey = %+v, %v; want %+v", site, err, want)
	}
	s.assertSentCount(t, 2)
	last := s.Sent()[1]
	if last.Method != http.MethodPost || last.Path != "/sites/site_7/rotate-key" || last.Body != "" {
		t.Errorf("call = %s %s %q, want POST /sites/site_7/rotate-key without a body", last.Method, last.Path, last.Body)
	}
	assertHeaders(t, last.Header, true, testUserAgent)

	s = stub(t, respond(http.StatusNotFound, `{"message":"Site not found."}`))
	d, _, _ = newDriver(t, testConfig(s.URL))
	_, err = d.RotateKey(context.Background(), "site_gone")
	wantClass(t, err, licenses.ErrVendorRejected)
	if !errors.Is(err, licenses.ErrVendorSiteNotFound) {
		t.Errorf("err = %v, want licenses.ErrVendorSiteNotFound", err)
	}
	s.assertSentCount(t, 1)
}
