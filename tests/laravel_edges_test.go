package tests

import (
	"bufio"
	"io"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The edges where a Laravel 12 front end meets the API: headers, routing,
// pagination and validation as Laravel 12 (12.67) produces them. Each test
// names the Laravel class or behaviour it mirrors.

// rawExchange sends request (raw HTTP/1.1 text) to a real listener serving
// the app and returns the response's status line and header lines exactly
// as they came over the wire, and its body.
func rawExchange(t *testing.T, a *app, request string) (head []string, body string) {
	t.Helper()
	srv := httptest.NewServer(a.e)
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatalf("write: %v", err)
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read head: %v (so far %q)", err, head)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		head = append(head, line)
	}
	b, _ := io.ReadAll(r) // Connection: close: the body runs to EOF
	return head, string(b)
}

// headerLine is the first header line of head named exactly name (case
// counts), "" when none.
func headerLine(head []string, name string) string {
	for _, l := range head {
		if strings.HasPrefix(l, name+":") {
			return l
		}
	}
	return ""
}

// Laravel's ThrottleRequests::getHeaders spells X-RateLimit-Limit,
// X-RateLimit-Remaining (and X-RateLimit-Reset on a 429) with a capital L;
// Go's http.Header.Set would send X-Ratelimit-*. Checked on the raw bytes a
// real listener sends, since http.Header hides the case.
func TestLaravelRateLimitHeadersSpelledExactlyOnTheWire(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, rateLimited(1))
		tok := a.token("acme", auth.LicensesRead)
		req := "GET /api/licenses HTTP/1.1\r\nHost: licensor.test\r\nAuthorization: Bearer " + tok + "\r\nConnection: close\r\n\r\n"

		head, _ := rawExchange(t, a, req)
		if !strings.HasPrefix(head[0], "HTTP/1.1 200") {
			t.Fatalf("status line %q", head[0])
		}
		for _, want := range []string{"X-RateLimit-Limit: 1", "X-RateLimit-Remaining: 0"} {
			if got := headerLine(head, strings.SplitN(want, ":", 2)[0]); got != want {
				t.Errorf("header line %q, want %q; head: %q", got, want, head)
			}
		}

		head, _ = rawExchange(t, a, req)
		if !strings.HasPrefix(head[0], "HTTP/1.1 429") {
			t.Fatalf("status line %q", head[0])
		}
		if headerLine(head, "X-RateLimit-Reset") == "" || headerLine(head, "X-RateLimit-Limit") != "X-RateLimit-Limit: 1" {
			t.Errorf("429 head %q, want X-RateLimit-Reset and X-RateLimit-Limit spelled as Laravel does", head)
		}
		for _, l := range head {
			if strings.HasPrefix(l, "X-Ratelimit-") {
				t.Errorf("canonicalised header line %q", l)
			}
		}
	})
}

// Symfony's ResponseHeaderBag gives a response with no cache header of its
// own "Cache-Control: no-cache, private", so every Laravel answer has it:
// successes, errors, the router's 404 and 405, probes.
func TestLaravelCacheControlOnEveryResponse(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		h := a.consumer("acme")
		for _, r := range []*response{
			a.do("GET", "/api/licenses", "", h...).wantStatus(200),
			a.do("POST", "/api/licenses", `{}`, h...).wantStatus(422),
			a.do("GET", "/api/licenses", ""),
			a.do("GET", "/api/nothing-here", "", h...).wantStatus(404),
			a.do("PUT", "/api/licenses", "", h...).wantStatus(405),
			a.do("GET", "/healthz", "").wantStatus(200),
		} {
			if got := r.Header().Values("Cache-Control"); len(got) != 1 || got[0] != "no-cache, private" {
				t.Errorf("status %d: Cache-Control = %q, want [\"no-cache, private\"]", r.Code, got)
			}
		}
	})
}

// Laravel's Paginator::resolveCurrentPage: the page is the query's page when
// filter_var(FILTER_VALIDATE_INT) takes it and it is >= 1, else 1; never a
// 422. On every paginated route. per_page keeps licensor's rule, declared
// as Laravel's ['nullable', 'integer', 'min:1', 'max:100'], with Laravel's
// messages, one per failing rule.
func TestLaravelPageFallsBackToOne(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		a.create(acme, "a.test")
		a.create(acme, "b.test")
		admin := bearer(a.token("ops", auth.All))
		routes := []struct {
			path string
			h    []string
		}{{"/api/licenses", acme}, {"/api/intents", admin}, {"/api/tokens/events", admin}}
		for _, q := range []string{"abc", "0", "-1", "1.5", "01", "", "99999999999999999999", "9223372036854775807"} {
			for _, route := range routes {
				r := a.do("GET", route.path+"?page="+q, "", route.h...).wantStatus(200)
				if got := r.json()["meta"].(map[string]any)["current_page"]; got != 1.0 {
					t.Errorf("%s?page=%s: current_page = %v, want 1", route.path, q, got)
				}
			}
		}
		// A valid page is that page (filter_var takes a sign and surrounding whitespace).
		for _, q := range []string{"2", "+2", "%202%20"} {
			r := a.do("GET", "/api/licenses?per_page=1&page="+q, "", acme...).wantStatus(200)
			if got := r.json()["meta"].(map[string]any)["current_page"]; got != 2.0 {
				t.Errorf("page=%s: current_page = %v, want 2", q, got)
			}
		}

		perPage := map[string]string{
			"0":    `{"message":"The per page field must be at least 1.","errors":{"per_page":["The per page field must be at least 1."]}}`,
			"101":  `{"message":"The per page field must not be greater than 100.","errors":{"per_page":["The per page field must not be greater than 100."]}}`,
			"abc":  `{"message":"The per page field must be an integer.","errors":{"per_page":["The per page field must be an integer."]}}`,
			"-1.5": `{"message":"The per page field must be an integer. (and 1 more error)","errors":{"per_page":["The per page field must be an integer.","The per page field must be at least 1."]}}`,
		}
		for q, want := range perPage {
			for _, route := range routes {
				r := a.do("GET", route.path+"?page=abc&per_page="+q, "", route.h...).wantStatus(422)
				if got := r.Body.String(); strings.TrimSpace(got) != want {
					t.Errorf("%s?per_page=%s:\n got %s\nwant %s", route.path, q, got, want)
				}
			}
		}
	})
}

// Laravel 12.23+ LengthAwarePaginator::linkCollection(): every link is
// {"url","label","page","active"}; Previous has currentPage()-1 when
// currentPage() > 1, Next currentPage()+1 when hasMorePages(), else null;
// the "..." separator stays {"url":null,"label":"...","active":false}.
func TestLaravelPaginationLinksCarryPage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		for _, d := range []string{"a.test", "b.test", "c.test"} {
			a.create(acme, d)
		}
		links := func(q string) string {
			r := a.do("GET", "/api/licenses?"+q, "", acme...).wantStatus(200).Body.String()
			i, j := strings.Index(r, `"links":[`), strings.Index(r, `],"path"`)
			if i < 0 || j < i {
				t.Fatalf("no meta.links in %s", r)
			}
			return r[i+len(`"links":[`) : j]
		}
		u := func(p string) string { return `"http://licensor.test/api/licenses?per_page=1&page=` + p + `"` }
		want := `{"url":` + u("1") + `,"label":"&laquo; Previous","page":1,"active":false},` +
			`{"url":` + u("1") + `,"label":"1","page":1,"active":false},` +
			`{"url":` + u("2") + `,"label":"2","page":2,"active":true},` +
			`{"url":` + u("3") + `,"label":"3","page":3,"active":false},` +
			`{"url":` + u("3") + `,"label":"Next &raquo;","page":3,"active":false}`
		if got := links("per_page=1&page=2"); got != want {
			t.Errorf("page 2 of 3:\n got %s\nwant %s", got, want)
		}
		// Past the last page: Previous points back one page, Next nowhere.
		want = `{"url":` + u("8") + `,"label":"&laquo; Previous","page":8,"active":false},` +
			`{"url":` + u("1") + `,"label":"1","page":1,"active":false},` +
			`{"url":` + u("2") + `,"label":"2","page":2,"active":false},` +
			`{"url":` + u("3") + `,"label":"3","page":3,"active":false},` +
			`{"url":null,"label":"Next &raquo;","page":null,"active":false}`
		if got := links("per_page=1&page=9"); got != want {
			t.Errorf("page 9 of 3:\n got %s\nwant %s", got, want)
		}
	})
}

// Laravel's router matches HEAD for every GET route (Route::get registers
// GET and HEAD) and Symfony's Response::prepare strips the body of a HEAD
// answer, keeping the GET's headers, Content-Length included. A 405 lists
// HEAD in Allow wherever GET is (MethodNotAllowedHttpException: the path's
// methods in Router::$verbs order, "GET, HEAD, POST").
func TestLaravelHeadOnEveryGetRoute(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		tok := a.token("acme", auth.LicensesRead, auth.LicensesWrite)
		id := a.create(bearer(tok), "a.test")
		for _, path := range []string{"/api/licenses", "/api/licenses/" + id, "/api/licenses/" + id + "/events", "/healthz", "/api/licenses/01NOSUCHLICENSE00000000000"} {
			get := a.do("GET", path, "", bearer(tok)...)
			head := a.do("HEAD", path, "", bearer(tok)...)
			if head.Code != get.Code || head.Body.Len() != 0 {
				t.Errorf("HEAD %s = %d with %d bytes of body, want GET's %d and none", path, head.Code, head.Body.Len(), get.Code)
			}
			for _, name := range []string{"Content-Type", "Cache-Control", "X-RateLimit-Limit"} {
				if g, h := get.Header().Get(name), head.Header().Get(name); g != h {
					t.Errorf("HEAD %s: %s = %q, GET's is %q", path, name, h, g)
				}
			}
			if got, want := head.Header().Get("Content-Length"), strconv.Itoa(get.Body.Len()); got != want {
				t.Errorf("HEAD %s: Content-Length = %q, want the GET body's %s", path, got, want)
			}
		}

		// Over a real listener: the bytes on the wire are the GET's head and no body.
		head, body := rawExchange(t, a, "HEAD /api/licenses HTTP/1.1\r\nHost: licensor.test\r\nAuthorization: Bearer "+tok+"\r\nConnection: close\r\n\r\n")
		getHead, getBody := rawExchange(t, a, "GET /api/licenses HTTP/1.1\r\nHost: licensor.test\r\nAuthorization: Bearer "+tok+"\r\nConnection: close\r\n\r\n")
		if head[0] != "HTTP/1.1 200 OK" || body != "" {
			t.Errorf("HEAD over the wire: %q, body %q", head, body)
		}
		if got, want := headerLine(head, "Content-Length"), "Content-Length: "+strconv.Itoa(len(getBody)); got != want || headerLine(getHead, "Content-Length") != want {
			t.Errorf("HEAD Content-Length line %q, GET's %q, want %q", got, headerLine(getHead, "Content-Length"), want)
		}

		// 405: Laravel's Allow.
		for path, want := range map[string]string{
			"/api/licenses":        "GET, HEAD, POST",
			"/api/licenses/" + id:  "GET, HEAD, DELETE",
			"/api/webhooks/vendor": "POST",
		} {
			r := a.do("PUT", path, "", bearer(tok)...).wantStatus(405)
			if got := r.Header().Values("Allow"); len(got) != 1 || got[0] != want {
				t.Errorf("PUT %s: Allow = %q, want %q", path, got, want)
			}
			// AbstractRouteCollection::requestMethodNotAllowed, shown in
			// production too (an HttpException's message).
			wantBody := `{"message":"The PUT method is not supported for route ` + strings.TrimPrefix(path, "/") + `. Supported methods: ` + want + `."}`
			if got := strings.TrimSpace(r.Body.String()); got != wantBody {
				t.Errorf("PUT %s: body %s, want %s", path, got, wantBody)
			}
		}
		// HEAD on a path with no GET is that path's 405.
		r := a.do("HEAD", "/api/webhooks/vendor", "").wantStatus(405)
		if got := r.Header().Get("Allow"); got != "POST" || r.Body.Len() != 0 {
			t.Errorf("HEAD /api/webhooks/vendor: Allow %q, body %q", got, r.Body.String())
		}
		// Its message names HEAD, as Laravel's does: the GET of it says so.
		msg := `{"message":"The HEAD method is not supported for route api/webhooks/vendor. Supported methods: POST."}`
		if got := r.Header().Get("Content-Length"); got != strconv.Itoa(len(msg)) {
			t.Errorf("HEAD /api/webhooks/vendor: Content-Length %s, want that of %s", got, msg)
		}
	})
}

// A HEAD's access line says HEAD, not the GET it was served as.
func TestLaravelHeadIsLoggedAsHead(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		a.do("HEAD", "/healthz", "").wantStatus(200)
		if !strings.Contains(a.logs.String(), `"method":"HEAD","route":"/healthz"`) {
			t.Errorf("no HEAD access line in %s", a.logs.String())
		}
	})
}

// Laravel's RouteCollection::match throws NotFoundHttpException("The route
// {path} could not be found.") for a path no route has, rendered in
// production as {"message":"The route api/tokens/x/y could not be found."}:
// nested paths under a route of another method included, where Echo's
// router answered 405. A real 405 (the path exists, not with this method)
// stays 405 with Allow.
func TestLaravelUnknownNestedPathIs404(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		admin := bearer(a.token("ops", auth.All))
		for _, tc := range []struct{ method, path, want string }{
			{"GET", "/api/tokens/x/y", `{"message":"The route api/tokens/x/y could not be found."}`},
			{"POST", "/api/tokens/x/y", `{"message":"The route api/tokens/x/y could not be found."}`},
			{"GET", "/api/licenses/x/y/z", `{"message":"The route api/licenses/x/y/z could not be found."}`},
			{"GET", "/api/nothing", `{"message":"The route api/nothing could not be found."}`},
			{"HEAD", "/api/nothing", ``},
			{"GET", "/", `{"message":"The route / could not be found."}`},
		} {
			r := a.do(tc.method, tc.path, "", admin...)
			if r.Code != 404 || r.Body.String() != tc.want || r.Header().Get("Allow") != "" {
				t.Errorf("%s %s = %d %s (Allow %q), want 404 %s", tc.method, tc.path, r.Code, r.Body.String(), r.Header().Get("Allow"), tc.want)
			}
		}
		// A resource that is not there keeps its own 404.
		a.do("GET", "/api/licenses/01NOSUCHLICENSE00000000000", "", admin...).wantStatus(404)
		// Real 405s stay.
		r := a.do("GET", "/api/tokens/01NOSUCHTOKEN0000000000000", "", admin...).wantStatus(405)
		if got := r.Header().Get("Allow"); got != "DELETE" {
			t.Errorf("GET /api/tokens/{id}: Allow %q, want DELETE", got)
		}
		a.do("PATCH", "/api/licenses", "", admin...).wantStatus(405)
	})
}

// withCORS sets CORS_ALLOWED_ORIGINS.
func withCORS(origins ...string) option {
	return withConfig(func(c *config.Config) { c.CORSAllowedOrigins = origins })
}

// Laravel 12's HandleCors with the default config/cors.php on api/*
// (fruitcake/php-cors CorsService): allowed_origins *, allowed_methods *,
// allowed_headers *, exposed_headers none, max_age 0, no credentials. A
// preflight is 204 before routing with the request's method and headers
// echoed; every api/* answer carries Access-Control-Allow-Origin.
func TestLaravelCORS(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		preflight := func(a *app, path, origin string) *response {
			return a.do("OPTIONS", path, "", "Origin", origin, "Access-Control-Request-Method", "post",
				"Access-Control-Request-Headers", "authorization,content-type,idempotency-key")
		}
		want := func(r *response, name, value string) {
			t.Helper()
			if got := r.Header().Values(name); value == "" && len(got) != 0 || value != "" && (len(got) != 1 || got[0] != value) {
				t.Errorf("%s = %q, want %q", name, got, value)
			}
		}

		a := newApp(t, db) // the default: *
		r := preflight(a, "/api/licenses", "https://app.example").wantStatus(204)
		want(r, "Access-Control-Allow-Origin", "*")
		want(r, "Access-Control-Allow-Methods", "POST")
		want(r, "Access-Control-Allow-Headers", "authorization,content-type,idempotency-key")
		want(r, "Access-Control-Max-Age", "0")
		want(r, "Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
		want(r, "Access-Control-Allow-Credentials", "")
		want(r, "Cache-Control", "no-cache, private")
		if r.Body.Len() != 0 {
			t.Errorf("preflight body %q", r.Body.String())
		}
		preflight(a, "/api/no-such-route", "https://app.example").wantStatus(204) // before routing, as HandleCors
		acme := a.consumer("acme")
		for _, r := range []*response{
			a.do("GET", "/api/licenses", "", append(acme, "Origin", "https://app.example")...).wantStatus(200),
			a.do("GET", "/api/licenses", "").wantStatus(401), // errors too, and without an Origin (allow all: always *)
			a.do("GET", "/api/nothing", "", "Origin", "https://app.example").wantStatus(404),
		} {
			want(r, "Access-Control-Allow-Origin", "*")
			want(r, "Access-Control-Expose-Headers", "")
			vary := "" // CORS adds none with every origin allowed
			if r.Code >= 400 {
				vary = "Accept" // an error's format follows Accept (problem+json)
			}
			want(r, "Vary", vary)
		}
		want(a.do("GET", "/healthz", "", "Origin", "https://app.example"), "Access-Control-Allow-Origin", "") // not api/*

		// One origin: always that origin, no Vary (CorsService::isSingleOriginAllowed).
		one := newApp(t, db, withCORS("https://app.example"))
		r = one.do("GET", "/api/licenses", "", append(one.consumer("acme"), "Origin", "https://evil.example")...).wantStatus(200)
		want(r, "Access-Control-Allow-Origin", "https://app.example")
		want(r, "Vary", "")

		// Several: the request's Origin when allowed, Vary: Origin always.
		many := newApp(t, db, withCORS("https://app.example", "https://*.acme.test"))
		h := many.consumer("acme")
		r = many.do("GET", "/api/licenses", "", append(h, "Origin", "https://admin.acme.test")...).wantStatus(200)
		want(r, "Access-Control-Allow-Origin", "https://admin.acme.test")
		want(r, "Vary", "Origin")
		r = many.do("GET", "/api/licenses", "", append(h, "Origin", "https://evil.example")...).wantStatus(200)
		want(r, "Access-Control-Allow-Origin", "")
		want(r, "Vary", "Origin")
		r = preflight(many, "/api/licenses", "https://app.example").wantStatus(204)
		want(r, "Access-Control-Allow-Origin", "https://app.example")
		want(r, "Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
		r = preflight(many, "/api/licenses", "https://evil.example").wantStatus(204)
		want(r, "Access-Control-Allow-Origin", "")
		want(r, "Access-Control-Allow-Methods", "")
		want(r, "Vary", "Origin, Access-Control-Request-Method")
	})
}

// POST /api/tokens validates as a Laravel FormRequest with the rules
// consumer ['required','string'], abilities ['required','array'],
// abilities.* ['string','in:…'], name ['nullable','string','max:255'],
// expires_in ['nullable','string', a positive duration]: every failing
// field, in that order except the items, keyed abilities.N ("The selected
// abilities.0 is invalid."), which come last: Illuminate\Validation\
// ValidationRuleParser::explodeRules replaces the abilities.* rule by
// abilities.0, abilities.1, … appended after the explicit rules, and
// Validator::passes() fills the message bag in that order. Attributes
// with underscores as spaces, and
// the message of Laravel's ValidationException::summarize ("… (and 2 more
// errors)"). The grant check (authorize()) still comes first.
func TestLaravelTokenValidation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		admin := bearer(a.token("ops", auth.All))
		for body, want := range map[string]string{
			`{"abilities":["licenses:read","nope",5],"name":7,"expires_in":"soon"}`: `{"message":"The consumer field is required. (and 5 more errors)","errors":{` +
				`"consumer":["The consumer field is required."],` +
				`"name":["The name field must be a string."],` +
				`"expires_in":["The expires in field must be a positive duration such as 720h."],` +
				`"abilities.1":["The selected abilities.1 is invalid."],` +
				`"abilities.2":["The abilities.2 field must be a string.","The selected abilities.2 is invalid."]}}`,
			// name is declared after abilities.*, yet its message is the first.
			`{"consumer":"acme","abilities":["nope"],"name":7}`: `{"message":"The name field must be a string. (and 1 more error)","errors":{` +
				`"name":["The name field must be a string."],` +
				`"abilities.0":["The selected abilities.0 is invalid."]}}`,
			`{"expires_in":720,"consumer":["acme"],"abilities":"licenses:read"}`: `{"message":"The consumer field must be a string. (and 2 more errors)","errors":{` +
				`"consumer":["The consumer field must be a string."],` +
				`"abilities":["The abilities field must be an array."],` +
				`"expires_in":["The expires in field must be a string."]}}`,
			`{"consumer":"  ","abilities":[],"name":null,"expires_in":""}`: `{"message":"The consumer field is required. (and 1 more error)","errors":{` +
				`"consumer":["The consumer field is required."],` +
				`"abilities":["The abilities field is required."]}}`,
			`{"consumer":"acme","abilities":["licenses:read"],"name":"` + strings.Repeat("n", 256) + `"}`: `{"message":"The name field must not be greater than 255 characters.","errors":{` +
				`"name":["The name field must not be greater than 255 characters."]}}`,
		} {
			r := a.do("POST", "/api/tokens", body, admin...).wantStatus(422)
			if got := r.Body.String(); got != want {
				t.Errorf("%s:\n got %s\nwant %s", body, got, want)
			}
		}
		// auth's own checks come back in the rules' order too.
		r := a.do("POST", "/api/tokens", `{"consumer":"ac\u200bme","abilities":["licenses:read"],"expires_in":"100000h"}`, admin...).wantStatus(422)
		if got := r.Body.String(); !strings.HasPrefix(got, `{"message":"The consumer field must not contain`) || strings.Index(got, `"consumer":`) > strings.Index(got, `"expires_in":`) {
			t.Errorf("auth's errors out of order: %s", got)
		}
		// authorize() first: a tokens:manage token may not grant *, whatever else is wrong.
		manager := bearer(a.token("ops", auth.TokensManage))
		a.do("POST", "/api/tokens", `{"abilities":["*"],"name":7}`, manager...).wantError(403, "ability_not_grantable")
		a.do("POST", "/api/tokens", `{"consumer":"acme","abilities":["licenses:read"],"name":" Deploy ","expires_in":"720h"}`, admin...).wantStatus(201)
	})
}

// A path with a trailing slash is the path without it, as Laravel's router
// matches it (Request::path() trims slashes): the same route, the same
// answer, the same intent (a create retried without the slash is a replay).
func TestLaravelTrailingSlashIsTheSameRoute(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		created := a.do("POST", "/api/licenses/", acmeBody, keyed(acme, "slash-1")...).wantStatus(201)
		replay := a.do("POST", "/api/licenses", acmeBody, keyed(acme, "slash-1")...).wantStatus(201)
		if replay.Header().Get("Idempotent-Replayed") != "true" || replay.Body.String() != created.Body.String() {
			t.Errorf("the create without the slash = %q %s, want the replay of the one with it", replay.Header().Get("Idempotent-Replayed"), replay.Body.String())
		}
		id := created.licenseData()["id"].(string)
		a.do("GET", "/api/licenses/"+id+"/", "", acme...).wantStatus(200)
		a.do("GET", "/api/licenses/", "", acme...).wantStatus(200)
		a.do("GET", "/healthz/", "").wantStatus(200)
		a.do("GET", "/", "").wantStatus(404)
		// An escaped path is trimmed as it was sent: %2F/ loses the slash,
		// never the escaped one, and answers as the path without it.
		for _, p := range []string{"/api/licenses/" + id + "%2F", "/api/licenses/" + id + "%2Fx"} {
			want := a.do("GET", p, "", acme...).Code
			if got := a.do("GET", p+"/", "", acme...).Code; got != want {
				t.Errorf("GET %s/ = %d, want %d as without the slash", p, got, want)
			}
		}
	})
}
