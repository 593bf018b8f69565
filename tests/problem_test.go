package tests

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/tests/testdb"
)

const problemJSON = "application/problem+json"

// problemCase is one error, asked for once in Laravel's shape and once as
// problem details.
type problemCase struct {
	name, method, path, body string
	headers                  []string
	status                   int
	code                     string
}

// An error asked for with Accept: application/problem+json is RFC 9457
// problem details: type (the code's URI, about:blank without one), title
// (the reason phrase), status, detail (the Laravel message, the same as
// without the header) and the code and errors extensions (the same too).
func TestProblemDetailsOnRequest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.e.GET("/boom", func(echo.Context) error { panic("secret internal detail") })
		acme, globex := a.consumer("acme"), a.consumer("globex")
		a.do(http.MethodPost, "/api/licenses", `{"name":"G","domain":"taken.test"}`, globex...).wantStatus(http.StatusCreated)
		cases := []problemCase{
			{"unauthenticated", "GET", "/api/licenses", "", nil, 401, ""},
			{"unknown route", "GET", "/api/nothing", "", acme, 404, ""},
			{"method not allowed", "DELETE", "/healthz", "", nil, 405, ""},
			{"malformed json", "POST", "/api/licenses", `{"name":`, acme, 400, "malformed_json"},
			{"validation", "POST", "/api/licenses", `{"name":123,"domain":"http://bad"}`, acme, 422, ""},
			{"domain taken", "POST", "/api/licenses", `{"name":"A","domain":"taken.test"}`, acme, 409, "domain_taken"},
			{"missing ability", "GET", "/api/tokens", "", acme, 403, "missing_ability"},
			{"server error", "GET", "/boom", "", nil, 500, ""},
		}
		for _, tc := range cases {
			laravel := a.do(tc.method, tc.path, tc.body, tc.headers...)
			laravel.wantError(tc.status, tc.code)
			want := laravel.json()

			r := a.do(tc.method, tc.path, tc.body, append([]string{"Accept", problemJSON}, tc.headers...)...)
			r.wantStatus(tc.status)
			if ct := r.Header().Get("Content-Type"); ct != problemJSON {
				t.Errorf("%s: Content-Type = %q, want %s", tc.name, ct, problemJSON)
			}
			if !headerNames(r.Header().Values("Vary"), "Accept") {
				t.Errorf("%s: Vary = %q, want Accept named", tc.name, r.Header().Values("Vary"))
			}
			got := r.json()
			wantType := "about:blank"
			if tc.code != "" {
				wantType = "https://licensor.dev/problems/" + strings.ReplaceAll(tc.code, "_", "-")
			}
			wantProblem := map[string]any{"type": wantType, "title": http.StatusText(tc.status), "status": float64(tc.status), "detail": want["message"]}
			if tc.code != "" {
				wantProblem["code"] = tc.code
			}
			if errs, ok := want["errors"]; ok {
				wantProblem["errors"] = errs
			}
			if !reflect.DeepEqual(got, wantProblem) {
				t.Errorf("%s: problem = %v, want %v", tc.name, got, wantProblem)
			}
		}
		// errors keeps its rule order, as in Laravel's shape.
		r := a.do(http.MethodPost, "/api/licenses", `{"name":123,"domain":"http://bad"}`, append([]string{"Accept", problemJSON}, acme...)...)
		if !strings.Contains(r.Body.String(), `"errors":{"name":`) {
			t.Errorf("problem errors out of rule order: %s", r.Body.String())
		}
	})
}

// Only a request that names application/problem+json (and prefers it at
// least as much as application/json) gets problem details; every other
// Accept gets Laravel's shape, byte for byte. A 202 operation_pending is no
// error: it keeps Laravel's shape and its operation member either way.
func TestProblemDetailsOnlyWhenAsked(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		laravel := a.do(http.MethodGet, "/api/nothing", "", acme...).wantStatus(http.StatusNotFound).Body.String()
		for accept, problem := range map[string]bool{
			"":                             false,
			"*/*":                          false,
			"application/*":                false,
			"application/json":             false,
			"text/html":                    false,
			"application/problem+json;q=0": false,
			"application/json, application/problem+json;q=0.5": false,
			"application/problem+json":                         true,
			"APPLICATION/Problem+JSON":                         true,
			"application/json;q=0.5, application/problem+json": true,
			"application/json, application/problem+json":       true,
			"text/html, application/problem+json;q=0.9":        true,
		} {
			h := append([]string{}, acme...)
			if accept != "" {
				h = append(h, "Accept", accept)
			}
			r := a.do(http.MethodGet, "/api/nothing", "", h...).wantStatus(http.StatusNotFound)
			switch ct := r.Header().Get("Content-Type"); {
			case problem && ct != problemJSON:
				t.Errorf("Accept %q: Content-Type %q, want %s", accept, ct, problemJSON)
			case !problem && (!strings.HasPrefix(ct, "application/json") || r.Body.String() != laravel):
				t.Errorf("Accept %q: %q %s, want Laravel's %s", accept, ct, r.Body.String(), laravel)
			}
		}

		a.vendor.script("POST", reply{status: 502, body: `bad gateway`, commit: true})
		r := a.do(http.MethodPost, "/api/licenses", acmeBody, append(keyed(acme, "problem-1"), "Accept", problemJSON)...)
		body := r.wantError(http.StatusAccepted, "operation_pending")
		if _, ok := body["operation"]; !ok || body["type"] != nil {
			t.Errorf("a 202 asked for as a problem is not Laravel's shape: %s", r.Body.String())
		}
		var probe map[string]json.RawMessage
		_ = json.Unmarshal(r.Body.Bytes(), &probe)
		if _, ok := probe["detail"]; ok {
			t.Errorf("a 202 carries problem members: %s", r.Body.String())
		}
	})
}

// headerNames reports whether the comma-separated header values name want.
func headerNames(vs []string, want string) bool {
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), want) {
				return true
			}
		}
	}
	return false
}
