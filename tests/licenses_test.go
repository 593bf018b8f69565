package tests

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/tests/testdb"
)

// consumer is a test caller with a token that may read and write licenses.
func (a *app) consumer(name string) []string {
	a.t.Helper()
	return bearer(a.token(name, auth.LicensesRead, auth.LicensesWrite))
}

// licenseData returns the "data" object of a license response.
func (r *response) licenseData() map[string]any {
	r.t.Helper()
	d, ok := r.json()["data"].(map[string]any)
	if !ok {
		r.t.Fatalf("no data object: %s", r.Body.String())
	}
	return d
}

func (a *app) licenseRows() int64 {
	a.t.Helper()
	var n int64
	if err := a.db.Gorm.Model(&licenses.License{}).Count(&n).Error; err != nil {
		a.t.Fatal(err)
	}
	return n
}

func (a *app) wantVendorCalls(method string, want int) {
	a.t.Helper()
	if got := a.vendor.count(method); got != want {
		a.t.Errorf("vendor %s calls = %d, want %d (calls: %v)", method, got, want, a.vendor.calls)
	}
}

func TestCreateLicenseForNewDomain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		r := a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"ACME.test."}`, a.consumer("acme")...)
		r.wantStatus(http.StatusCreated)
		d := r.licenseData()
		id, _ := d["id"].(string)
		if len(id) != 26 {
			t.Errorf("id = %v, want an opaque ULID", d["id"])
		}
		if got := r.Header().Get("Location"); got != "/api/licenses/"+id {
			t.Errorf("Location = %q", got)
		}
		if d["name"] != "Acme" || d["domain"] != "acme.test" || d["status"] != "active" || d["vendor_site_id"] != "site_1" {
			t.Errorf("license = %v", d)
		}
		if key, _ := d["license_key"].(string); !strings.HasPrefix(key, "LK-") {
			t.Errorf("license_key = %v", d["license_key"])
		}
		for _, f := range []string{"created_at", "updated_at"} {
			ts, _ := d[f].(string)
			if parsed, err := time.Parse(laravelTime, ts); err != nil || len(ts) != len(laravelTime) || time.Since(parsed) > time.Minute {
				t.Errorf("%s = %q, want Laravel's 2006-01-02T15:04:05.000000Z, UTC, now", f, ts)
			}
		}
		a.wantVendorCalls("", 2)
		a.wantVendorCalls("GET", 1)
		a.wantVendorCalls("POST", 1)
		if a.vendor.calls[0] != "GET /sites?domain=acme.test" {
			t.Errorf("first call = %q, want the list by domain", a.vendor.calls[0])
		}
	})
}

func TestCreateAdoptsTheVendorsExistingSite(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		existing := a.vendor.addSite("Acme", "acme.test")
		d := a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"acme.test"}`, a.consumer("acme")...).
			wantStatus(http.StatusCreated).licenseData()
		if d["vendor_site_id"] != existing.ID || d["license_key"] != existing.LicenseKey {
			t.Errorf("license = %v, want the existing site %s adopted", d, existing.ID)
		}
		a.wantVendorCalls("", 1)
		if a.vendor.siteCount() != 1 {
			t.Errorf("vendor holds %d sites, want 1", a.vendor.siteCount())
		}
	})
}

func TestCreateForADomainTheConsumerHolds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		first := a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"acme.test"}`, acme...).wantStatus(http.StatusCreated)
		second := a.do(http.MethodPost, "/api/licenses", `{"name":"Acme again","domain":"Acme.Test"}`, acme...)
		second.wantStatus(http.StatusOK)
		if second.Header().Get("Location") != "" {
			t.Error("a 200 carries Location")
		}
		if got, want := second.licenseData()["id"], first.licenseData()["id"]; got != want {
			t.Errorf("id = %v, want the existing %v", got, want)
		}
		a.wantVendorCalls("", 2) // the first request's list + create only
	})
}

func TestCreateForAnotherConsumersDomain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"acme.test"}`, a.consumer("acme")...).wantStatus(http.StatusCreated)
		r := a.do(http.MethodPost, "/api/licenses", `{"name":"Mine","domain":"acme.test"}`, a.consumer("globex")...)
		r.wantError(http.StatusConflict, "domain_taken")
		if strings.Contains(r.Body.String(), "acme\"") || strings.Contains(strings.ToLower(r.Body.String()), "consumer") {
			t.Errorf("409 reveals the owner: %s", r.Body.String())
		}
		a.wantVendorCalls("", 2)
		if n := a.licenseRows(); n != 1 {
			t.Errorf("%d license rows, want 1", n)
		}
	})
}

func TestCreateValidation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		cases := []struct {
			name, body, field string
		}{
			{"no name", `{"domain":"a.test"}`, "name"},
			{"blank name", `{"name":"   ","domain":"a.test"}`, "name"},
			{"long name", `{"name":"` + strings.Repeat("n", 256) + `","domain":"a.test"}`, "name"},
			{"no domain", `{"name":"A"}`, "domain"},
			{"scheme and path", `{"name":"A","domain":"http://a.test/x"}`, "domain"},
			{"port", `{"name":"A","domain":"a.test:80"}`, "domain"},
			{"ip", `{"name":"A","domain":"127.0.0.1"}`, "domain"},
			{"empty label", `{"name":"A","domain":"a..test"}`, "domain"},
			{"300 characters", `{"name":"A","domain":"` + strings.Repeat("abcdefghi.", 30) + `test"}`, "domain"},
			{"sql", `{"name":"A","domain":"'; DROP TABLE licenses;--"}`, "domain"},
			{"user info", `{"name":"A","domain":"user@a.test"}`, "domain"},
			{"name not a string", `{"name":123,"domain":"a.test"}`, "name"},
			{"domain not a string", `{"name":"A","domain":["a.test"]}`, "domain"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				m := a.do(http.MethodPost, "/api/licenses", tc.body, acme...).wantError(http.StatusUnprocessableEntity, "")
				errs, _ := m["errors"].(map[string]any)
				if errs[tc.field] == nil {
					t.Errorf("errors = %v, want %s", m["errors"], tc.field)
				}
			})
		}
		a.wantVendorCalls("", 0)
		if n := a.licenseRows(); n != 0 {
			t.Errorf("%d license rows after invalid input, want 0", n)
		}
	})
}

func TestCreateStoresNormalisedDomains(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		d := a.do(http.MethodPost, "/api/licenses", `{"name":"Bücher","domain":"bücher.example","extra":{"ignored":true}}`, acme...).
			wantStatus(http.StatusCreated).licenseData()
		if d["domain"] != "xn--bcher-kva.example" || d["name"] != "Bücher" {
			t.Errorf("license = %v", d)
		}
		if a.vendor.calls[0] != "GET /sites?domain=xn--bcher-kva.example" {
			t.Errorf("vendor asked for %q", a.vendor.calls[0])
		}
	})
}

func TestCreateRejectsBadBodies(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		a.do(http.MethodPost, "/api/licenses", `{"name":"A",`, acme...).wantError(http.StatusBadRequest, "malformed_json")
		a.do(http.MethodPost, "/api/licenses", `["a.test"]`, acme...).wantError(http.StatusBadRequest, "malformed_json")
		a.do(http.MethodPost, "/api/licenses", `{"name":"A","domain":"a.test"} trailing`, acme...).wantError(http.StatusBadRequest, "malformed_json")
		huge := `{"name":"A","domain":"a.test","pad":"` + strings.Repeat("x", 70<<10) + `"}`
		a.do(http.MethodPost, "/api/licenses", huge, acme...).wantError(http.StatusRequestEntityTooLarge, "payload_too_large")
		a.do(http.MethodPost, "/api/licenses", "name=A&domain=a.test", append(acme, "Content-Type", "text/plain")...).
			wantError(http.StatusUnsupportedMediaType, "unsupported_media_type")
		a.wantVendorCalls("", 0)
	})
}

// TestOversizedBodyWithoutLength streams a body with no Content-Length, so
// the limit is enforced while reading, not from the header.
func TestOversizedBodyWithoutLength(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"))
	srv := httptest.NewServer(a.e)
	defer srv.Close()
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"name":"A","domain":"a.test","pad":"`))
		for range 80 {
			pw.Write([]byte(strings.Repeat("x", 1024)))
		}
		pw.Write([]byte(`"}`))
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/licenses", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", a.consumer("acme")[1])
	resp, err := contractClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status = %d, want 413", resp.StatusCode)
	}
}

func TestCreateWhenTheVendorFails(t *testing.T) {
	body := `{"name":"Acme","domain":"acme.test"}`
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		t.Run("list answers 503", func(t *testing.T) {
			a := newApp(t, db)
			a.vendor.script("GET", reply{status: 503, body: `{"message":"down for maintenance at 10.0.0.7"}`})
			r := a.do(http.MethodPost, "/api/licenses", body, a.consumer("acme")...)
			r.wantError(http.StatusServiceUnavailable, "vendor_unavailable")
			if strings.Contains(r.Body.String(), "10.0.0.7") {
				t.Errorf("vendor body leaked: %s", r.Body.String())
			}
			a.wantVendorCalls("", 1)
		})
		t.Run("429 past the budget carries Retry-After", func(t *testing.T) {
			a := newApp(t, db)
			// 3 retries of 3 s fit the 10 s wait budget: 4 calls in all.
			tooMany := reply{status: 429, body: `{}`, header: map[string]string{"Retry-After": "3"}}
			a.vendor.script("GET", tooMany, tooMany, tooMany, tooMany)
			r := a.do(http.MethodPost, "/api/licenses", body, a.consumer("acme")...)
			r.wantError(http.StatusServiceUnavailable, "vendor_unavailable")
			if got := r.Header().Get("Retry-After"); got != "3" {
				t.Errorf("Retry-After = %q, want the vendor's 3", got)
			}
			a.wantVendorCalls("GET", 4)
			a.wantVendorCalls("POST", 0)
		})
		t.Run("unreachable", func(t *testing.T) {
			a := newApp(t, db)
			a.vendor.srv.Close()
			a.do(http.MethodPost, "/api/licenses", body, a.consumer("acme")...).wantError(http.StatusServiceUnavailable, "vendor_unavailable")
		})
		t.Run("rejects the input", func(t *testing.T) {
			a := newApp(t, db)
			blocked := reply{status: 422, body: `{"message":"internal vendor rule 42","errors":{"domain":["blocked"]}}`}
			a.vendor.script("POST", blocked, blocked)
			r := a.do(http.MethodPost, "/api/licenses", body, a.consumer("acme")...)
			r.wantError(http.StatusUnprocessableEntity, "vendor_rejected")
			if strings.Contains(r.Body.String(), "rule 42") {
				t.Errorf("vendor body leaked: %s", r.Body.String())
			}
			// list, create, the list that checks for a racing site; the domain has
			// none, so the create is asked once more (a revoke may have deleted
			// the site in between), refused again, and listed again
			a.wantVendorCalls("", 5)
		})
		t.Run("create answers 500: outcome unknown", func(t *testing.T) {
			a := newApp(t, db)
			a.vendor.script("POST", reply{status: 500, body: `oops`})
			r := a.do(http.MethodPost, "/api/licenses", body, a.consumer("acme")...)
			r.wantError(http.StatusAccepted, "operation_pending")
			if r.Header().Get("Retry-After") == "" {
				t.Error("202 without Retry-After")
			}
			a.wantVendorCalls("POST", 1)
		})
		t.Run("create times out: outcome unknown", func(t *testing.T) {
			a := newApp(t, db)
			a.vendor.script("POST", reply{commit: true, hold: make(chan struct{})}) // committed, never answered
			a.do(http.MethodPost, "/api/licenses", body, a.consumer("acme")...).wantError(http.StatusAccepted, "operation_pending")
			a.wantVendorCalls("POST", 1)
			if a.licenseRows() != 0 {
				t.Error("a license row was written for an unknown outcome")
			}
		})
	})
}

func TestRacingCreatesEndWithOneLicenseAndOneSite(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		for _, tc := range []struct {
			name      string
			consumers []string
		}{{"same consumer", []string{"acme", "acme"}}, {"two consumers", []string{"acme", "globex"}}} {
			t.Run(tc.name, func(t *testing.T) {
				a := newApp(t, db)
				a.db.Gorm.Exec("DELETE FROM license_events")
				a.db.Gorm.Exec("DELETE FROM licenses")
				tokens := [][]string{a.consumer(tc.consumers[0]), a.consumer(tc.consumers[1])}
				// Both requests pass the vendor's list before either creates.
				release := make(chan struct{})
				entered := []chan struct{}{make(chan struct{}), make(chan struct{})}
				a.vendor.script("GET", reply{hold: release, entered: entered[0]}, reply{hold: release, entered: entered[1]})
				codes := make([]int, 2)
				var wg sync.WaitGroup
				for i := range 2 {
					wg.Go(func() {
						codes[i] = a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"race.test"}`, tokens[i]...).Code
					})
				}
				<-entered[0]
				<-entered[1]
				close(release)
				wg.Wait()
				if a.vendor.siteCount() != 1 {
					t.Errorf("vendor holds %d sites, want 1", a.vendor.siteCount())
				}
				if n := a.licenseRows(); n != 1 {
					t.Errorf("%d license rows, want 1", n)
				}
				t.Logf("answers %v", codes)
				if codes[0] != http.StatusCreated && codes[1] != http.StatusCreated {
					t.Errorf("answers %v, want one 201", codes)
				}
			})
		}
	})
}

func TestClientHangUpStillCompletesTheCreate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		release, entered := make(chan struct{}), make(chan struct{})
		a.vendor.script("POST", reply{hold: release, entered: entered})

		ctx, hangUp := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/api/licenses", strings.NewReader(`{"name":"Acme","domain":"acme.test"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(acme[0], acme[1])
		done := make(chan struct{})
		go func() { a.e.ServeHTTP(httptest.NewRecorder(), req); close(done) }()
		<-entered
		hangUp() // the client goes away while the vendor is creating the site
		close(release)
		<-done
		if n := a.licenseRows(); n != 1 {
			t.Fatalf("%d license rows after the hang-up, want 1: the create was cut short", n)
		}
		// The retry finds the license: 200, no new vendor call.
		a.do(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"acme.test"}`, acme...).wantStatus(http.StatusOK)
		a.wantVendorCalls("", 2)
	})
}

// A JSON string that is not valid UTF-8 is refused with 422 on its field,
// in every body the API reads, never read with its bad bytes replaced (two
// different bodies would fingerprint alike). Nothing is recorded.
func TestInvalidUTF8IsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		r := a.do(http.MethodPost, "/api/licenses", "{\"name\":\"Ac\xffme\",\"domain\":\"acme.test\"}", keyed(acme, "utf8-1")...)
		body := r.wantError(http.StatusUnprocessableEntity, "")
		if errs, _ := body["errors"].(map[string]any); errs == nil || errs["name"] == nil {
			t.Errorf("errors = %v, want one on name", body["errors"])
		}
		if rec := a.record("utf8-1"); rec != nil {
			t.Errorf("a refused body was recorded: %s", rec.Status)
		}
		root := bearer(a.token("ops", "*"))
		r = a.do(http.MethodPost, "/api/tokens", "{\"consumer\":\"glo\xfebex\",\"abilities\":[\"licenses:read\"]}", root...)
		body = r.wantError(http.StatusUnprocessableEntity, "")
		if errs, _ := body["errors"].(map[string]any); errs == nil || errs["consumer"] == nil {
			t.Errorf("errors = %v, want one on consumer", body["errors"])
		}
		// An escaped lone surrogate is no UTF-8 either: encoding/json would
		// read it as U+FFFD, so "\ud800y" and "\udbffy" would be one intent.
		r = a.do(http.MethodPost, "/api/licenses", `{"name":"\ud800y","domain":"acme.test"}`, keyed(acme, "utf8-2")...)
		if errs, _ := r.wantError(http.StatusUnprocessableEntity, "")["errors"].(map[string]any); errs == nil || errs["name"] == nil {
			t.Errorf("a lone surrogate: errors = %v, want one on name", errs)
		}
		r = a.do(http.MethodPost, "/api/tokens", `{"consumer":"\udfff","abilities":["licenses:read"]}`, root...)
		if errs, _ := r.wantError(http.StatusUnprocessableEntity, "")["errors"].(map[string]any); errs == nil || errs["consumer"] == nil {
			t.Errorf("a lone surrogate: errors = %v, want one on consumer", errs)
		}
		if rec := a.record("utf8-2"); rec != nil {
			t.Errorf("a refused body was recorded: %s", rec.Status)
		}
		a.wantVendorCalls("POST", 0)
	})
}
