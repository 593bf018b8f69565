package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCreateLicenseRetriesWithOneKey: every retryable answer is retried,
// and every attempt carries the one key made before the first.
func TestCreateLicenseRetriesWithOneKey(t *testing.T) {
	tests := []struct {
		name   string
		script []reply
	}{
		{"503 vendor_unavailable", []reply{{status: 503, code: "vendor_unavailable"}, created}},
		{"500", []reply{{status: 500}, created}},
		{"502 from a proxy, not JSON", []reply{{status: 502, body: "<html>bad gateway</html>"}, created}},
		{"connection reset", []reply{{reset: true}, created}},
		{"429 with Retry-After", []reply{{status: 429, header: map[string]string{"Retry-After": "2"}}, created}},
		{"409 request_in_progress", []reply{{status: 409, code: CodeRequestInProgress, header: map[string]string{"Retry-After": "1"}}, created}},
		{"202 operation_pending", []reply{{status: 202, code: CodeOperationPending, header: map[string]string{"Retry-After": "5"}}, created}},
		{"pending, in progress, unavailable, then created", []reply{
			{status: 202, code: CodeOperationPending}, {status: 202, code: CodeOperationPending},
			{status: 409, code: CodeRequestInProgress}, {status: 503, code: "vendor_unavailable"}, created}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, tt.script...)
			c, rec := newTestClient(t, f)
			lic, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
			if err != nil {
				t.Fatalf("CreateLicense: %v", err)
			}
			if got, want := lic.ID, "01JTEST"; got != want || !lic.Created || lic.Replayed {
				t.Errorf("license = %+v, want id %s, Created, not Replayed", lic, want)
			}
			reqs := f.requests()
			if got, want := len(reqs), len(tt.script); got != want {
				t.Fatalf("requests = %d, want %d", got, want)
			}
			if got, want := len(rec.waits), len(tt.script)-1; got != want {
				t.Errorf("waits = %v, want %d of them", rec.waits, want)
			}
			assertOneKey(t, reqs)
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(reqs[0].key) {
				t.Errorf("key = %q, want 128 bits in hex", reqs[0].key)
			}
			if got, want := reqs[0].auth, "Bearer "+testToken; got != want {
				t.Errorf("Authorization = %q, want %q", got, want)
			}
			if got, want := reqs[0].body, `{"domain":"acme.test","name":"Acme"}`; got != want {
				t.Errorf("body = %s, want %s", got, want)
			}
		})
	}
}

func TestCreateLicenseNewKeyPerCall(t *testing.T) {
	f := newFakeAPI(t, created)
	c, _ := newTestClient(t, f)
	for range 2 {
		if _, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"}); err != nil {
			t.Fatal(err)
		}
	}
	if reqs := f.requests(); reqs[0].key == reqs[1].key {
		t.Errorf("two calls sent the same key %q, want one key per intent", reqs[0].key)
	}
}

func TestCreateLicenseGivenKey(t *testing.T) {
	f := newFakeAPI(t, reply{status: 503}, created)
	c, _ := newTestClient(t, f)
	const key = "order-42:license"
	if _, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test", IdempotencyKey: key}); err != nil {
		t.Fatal(err)
	}
	for i, r := range f.requests() {
		if r.key != key {
			t.Errorf("request %d: key %q, want %q", i+1, r.key, key)
		}
	}
}

func TestCreateLicenseRefusesInvalidKey(t *testing.T) {
	f := newFakeAPI(t, created)
	c, _ := newTestClient(t, f)
	for _, key := range []string{"has space", "é", strings.Repeat("k", 256), "tab\t"} {
		_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test", IdempotencyKey: key})
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("key %q: err = %v, want ErrInvalidKey", key, err)
		}
	}
	if got := len(f.requests()); got != 0 {
		t.Errorf("requests = %d, want none for an invalid key", got)
	}
}

func TestCreateLicenseExistingAndReplayed(t *testing.T) {
	tests := []struct {
		name                  string
		reply                 reply
		wantCreated, wantRepl bool
	}{
		{"200: already held", reply{status: 200, body: licenseJSON}, false, false},
		{"201 replayed", reply{status: 201, body: licenseJSON, header: map[string]string{"Idempotent-Replayed": "true"}}, true, true},
		{"200 replayed", reply{status: 200, body: licenseJSON, header: map[string]string{"Idempotent-Replayed": "true"}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newTestClient(t, newFakeAPI(t, tt.reply))
			lic, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
			if err != nil {
				t.Fatal(err)
			}
			if lic.Created != tt.wantCreated || lic.Replayed != tt.wantRepl {
				t.Errorf("Created, Replayed = %v, %v; want %v, %v", lic.Created, lic.Replayed, tt.wantCreated, tt.wantRepl)
			}
			want := time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC)
			if lic.Domain != "acme.test" || lic.LicenseKey != "LK-1" || !lic.CreatedAt.Equal(want) {
				t.Errorf("license = %+v, want acme.test, LK-1, created %v", lic, want)
			}
		})
	}
}

// TestCreateLicenseDoesNotRetry: any other 4xx is the answer: exactly one
// request, no wait, and an *APIError that carries all of it.
func TestCreateLicenseDoesNotRetry(t *testing.T) {
	validation := `{"message":"The domain field is required.","errors":{"domain":["The domain field is required."]}}`
	tests := []struct {
		name   string
		reply  reply
		status int
		code   string
	}{
		{"422 validation", reply{status: 422, body: validation}, 422, ""},
		{"422 idempotency_key_reused", reply{status: 422, code: "idempotency_key_reused"}, 422, "idempotency_key_reused"},
		{"422 vendor_rejected", reply{status: 422, code: "vendor_rejected"}, 422, "vendor_rejected"},
		{"409 domain_taken", reply{status: 409, code: "domain_taken"}, 409, "domain_taken"},
		{"401", reply{status: 401, body: `{"message":"Unauthenticated."}`}, 401, ""},
		{"403 missing_ability", reply{status: 403, code: "missing_ability"}, 403, "missing_ability"},
		{"400 idempotency_key_invalid", reply{status: 400, code: "idempotency_key_invalid"}, 400, "idempotency_key_invalid"},
		{"400 malformed_json", reply{status: 400, code: "malformed_json"}, 400, "malformed_json"},
		{"202 without operation_pending", reply{status: 202, code: "something_else"}, 202, "something_else"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, tt.reply, created)
			c, rec := newTestClient(t, f)
			_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an *APIError", err)
			}
			if apiErr.Status != tt.status || apiErr.Code != tt.code || apiErr.Message == "" || apiErr.RequestID != "req-1" {
				t.Errorf("APIError = %+v, want status %d, code %q, a message, request id req-1", apiErr, tt.status, tt.code)
			}
			if got := len(f.requests()); got != 1 {
				t.Errorf("requests = %d, want exactly 1", got)
			}
			if len(rec.waits) != 0 {
				t.Errorf("waits = %v, want none", rec.waits)
			}
			mustNotContain(t, "error", err.Error(), testToken)
		})
	}
	t.Run("fields of a validation error", func(t *testing.T) {
		c, _ := newTestClient(t, newFakeAPI(t, reply{status: 422, body: validation}))
		_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme"})
		var apiErr *APIError
		if !errors.As(err, &apiErr) || len(apiErr.Fields["domain"]) != 1 || apiErr.Message != "The domain field is required." {
			t.Errorf("err = %#v, want the message and errors.domain", apiErr)
		}
	})
}

func TestListLicenses(t *testing.T) {
	page := `{"data":[` + strings.TrimSuffix(strings.TrimPrefix(licenseJSON, `{"data":`), "}") +
		`],"links":{"first":"http://licensor.test/api/licenses?per_page=1&page=1","last":"http://licensor.test/api/licenses?per_page=1&page=3",` +
		`"prev":"http://licensor.test/api/licenses?per_page=1&page=1","next":"http://licensor.test/api/licenses?per_page=1&page=3"},` +
		`"meta":{"current_page":2,"from":2,"last_page":3,"links":[` +
		`{"url":"http://licensor.test/api/licenses?per_page=1&page=1","label":"&laquo; Previous","active":false},` +
		`{"url":"http://licensor.test/api/licenses?per_page=1&page=1","label":"1","active":false},` +
		`{"url":"http://licensor.test/api/licenses?per_page=1&page=2","label":"2","active":true},` +
		`{"url":"http://licensor.test/api/licenses?per_page=1&page=3","label":"3","active":false},` +
		`{"url":"http://licensor.test/api/licenses?per_page=1&page=3","label":"Next &raquo;","active":false}],` +
		`"path":"http://licensor.test/api/licenses","per_page":1,"to":2,"total":3}}`
	f := newFakeAPI(t, reply{status: 200, body: page})
	c, _ := newTestClient(t, f)
	got, err := c.ListLicenses(context.Background(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Licenses) != 1 || got.Licenses[0].ID != "01JTEST" || got.CurrentPage != 2 || got.PerPage != 1 || got.Total != 3 || got.LastPage != 3 {
		t.Errorf("page = %+v, want one license, page 2 of 3, 1 per page, 3 in all", got)
	}
	if want := time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC); len(got.Licenses) == 1 && !got.Licenses[0].CreatedAt.Equal(want) {
		t.Errorf("created_at = %v, want %v (Laravel's microseconds)", got.Licenses[0].CreatedAt, want)
	}
	if _, err := c.ListLicenses(context.Background(), 0, 0); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if got, want := reqs[0].method+" "+reqs[0].path+"?"+reqs[0].query, "GET /api/licenses?page=2&per_page=1"; got != want {
		t.Errorf("request = %s, want %s", got, want)
	}
	if got := reqs[1].query; got != "" {
		t.Errorf("defaults sent query %q, want none", got)
	}
	if reqs[0].key != "" {
		t.Errorf("a read sent Idempotency-Key %q", reqs[0].key)
	}
}

func TestReadsRetryToo(t *testing.T) {
	f := newFakeAPI(t, reply{status: 503}, reply{status: 200, body: licenseJSON})
	c, rec := newTestClient(t, f)
	if _, err := c.GetLicense(context.Background(), "01JTEST"); err != nil {
		t.Fatal(err)
	}
	if got := len(f.requests()); got != 2 || len(rec.waits) != 1 {
		t.Errorf("requests = %d, waits = %v; want 2 and one wait", got, rec.waits)
	}
}

func TestGetLicense(t *testing.T) {
	f := newFakeAPI(t, reply{status: 200, body: licenseJSON}, reply{status: 404, body: `{"message":"Not Found."}`})
	c, _ := newTestClient(t, f)
	lic, err := c.GetLicense(context.Background(), "01JTEST")
	if err != nil || lic.ID != "01JTEST" || lic.Status != "active" {
		t.Fatalf("GetLicense = %+v, %v; want 01JTEST active", lic, err)
	}
	_, err = c.GetLicense(context.Background(), "01JNOPE")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Message != "Not Found." {
		t.Errorf("unknown id: err = %v, want an *APIError 404", err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].path != "/api/licenses/01JTEST" || reqs[1].path != "/api/licenses/01JNOPE" {
		t.Errorf("requests = %+v, want one GET each, the 404 not retried", reqs)
	}
	if _, err := c.GetLicense(context.Background(), ""); err == nil {
		t.Error("GetLicense(\"\") succeeded, want an error")
	}
}

func TestRevokeLicense(t *testing.T) {
	f := newFakeAPI(t, reply{status: 204}, reply{status: 404, body: `{"message":"Not Found."}`})
	c, _ := newTestClient(t, f)
	if err := c.RevokeLicense(context.Background(), "01JTEST"); err != nil {
		t.Fatal(err)
	}
	err := c.RevokeLicense(context.Background(), "01JNOPE")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Errorf("unknown id: err = %v, want an *APIError 404", err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].method != http.MethodDelete || reqs[0].path != "/api/licenses/01JTEST" {
		t.Errorf("requests = %+v, want DELETE /api/licenses/01JTEST then one for the 404", reqs)
	}
}

func TestResponseBodyLimit(t *testing.T) {
	huge := `{"data":{"name":"` + strings.Repeat("a", MaxResponseBytes) + `"}}`
	f := newFakeAPI(t, reply{status: 200, body: huge})
	c, _ := newTestClient(t, f)
	if _, err := c.GetLicense(context.Background(), "01JTEST"); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("err = %v, want the body refused as too large", err)
	}
	if got := len(f.requests()); got != 1 {
		t.Errorf("requests = %d, want 1: an oversized success is not retried", got)
	}
}

// TestTokenInNoError: whatever fails, the token is in no error text, and
// printing the Client does not show it.
func TestTokenInNoError(t *testing.T) {
	f := newFakeAPI(t, reply{status: 503})
	c, _ := newTestClient(t, f, WithMaxAttempts(2))
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	mustNotContain(t, "gave-up error", err.Error(), testToken)

	f.Close() // nothing listens any more: a network error on every attempt
	_, err = c.ListLicenses(context.Background(), 0, 0)
	if err == nil {
		t.Fatal("a closed server answered")
	}
	mustNotContain(t, "network error", err.Error(), testToken)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		mustNotContain(t, "printed client", s, testToken)
	}
}

// RotateLicenseKey posts to the license's rotate-key path with one key on
// every attempt, retries what CreateLicense retries, and reports a replay.
func TestRotateLicenseKey(t *testing.T) {
	rotated := reply{status: 200, body: strings.Replace(licenseJSON, "LK-1", "LK-2", 1), header: map[string]string{"Idempotent-Replayed": "true"}}
	f := newFakeAPI(t, reply{status: 503, code: "vendor_unavailable"}, reply{status: 202, code: CodeOperationPending}, rotated)
	c, _ := newTestClient(t, f)
	lic, err := c.RotateLicenseKey(context.Background(), "01JTEST", "")
	if err != nil {
		t.Fatalf("RotateLicenseKey: %v", err)
	}
	if lic.LicenseKey != "LK-2" || !lic.Replayed {
		t.Errorf("license = %+v, want the new key LK-2, Replayed", lic)
	}
	reqs := f.requests()
	if len(reqs) != 3 || reqs[0].method != http.MethodPost || reqs[0].path != "/api/licenses/01JTEST/rotate-key" || reqs[0].body != "" {
		t.Fatalf("requests = %+v, want three bodiless POSTs to /api/licenses/01JTEST/rotate-key", reqs)
	}
	assertOneKey(t, reqs)

	f = newFakeAPI(t, reply{status: 409, code: "license_not_active"})
	c, _ = newTestClient(t, f)
	var apiErr *APIError
	if _, err := c.RotateLicenseKey(context.Background(), "01JTEST", "my-key"); !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Code != "license_not_active" {
		t.Errorf("revoked license: err = %v, want an *APIError 409 license_not_active", err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].key != "my-key" {
		t.Errorf("requests = %+v, want one, keyed my-key", reqs)
	}
	if _, err := c.RotateLicenseKey(context.Background(), "01JTEST", "bad key"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("a key with a space: err = %v, want ErrInvalidKey", err)
	}
	if _, err := c.RotateLicenseKey(context.Background(), "", ""); err == nil {
		t.Error("an empty id accepted")
	}
}
