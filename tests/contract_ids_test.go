package tests

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/web"
	"github.com/licensor-api/licensor/tests/testdb"
)

// impossibleIDs are ids no row can have (every id licensor makes is a
// ULID, an event's behind its prefix): each as a path segment and as it
// reads decoded. MySQL compares an ascii column with a utf8mb4 parameter
// by raising a collation error, so a non-ASCII one that reached a query
// was a 500 there and a 404 on SQLite.
var impossibleIDs = []struct{ name, segment, raw string }{
	{"non-ASCII", "%C3%A9", "é"},
	{"emoji", "%F0%9F%98%80", "😀"},
	{"a ULID's 26 bytes, one letter non-ASCII", "01JDQ8Z7F0A2B4C6D8E0G2H4%C3%A9", "01JDQ8Z7F0A2B4C6D8E0G2H4é"},
	{"over-long", strings.Repeat("A", 300), strings.Repeat("A", 300)},
	{"NUL", "%00", "\x00"},
	{"newline", "%0A", "\n"},
	{"DEL", "%7F", "\x7f"},
}

// absentID is a well-formed ULID nothing has: the other parameters of a
// route while one is impossible.
const absentID = "01JDQ8Z7F0A2B4C6D8E0G2H4J6"

// paramRoute is a route of the server with parameters in its path.
type paramRoute struct {
	method, path string
	params       []int // the indexes of the path's parameter segments
}

// paramRoutes are the server's routes with a parameter in their path, as
// its router lists them: a new route is covered as soon as it is served.
func paramRoutes(t *testing.T, e *echo.Echo) (api, console []paramRoute) {
	t.Helper()
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound || strings.HasPrefix(r.Method, "echo_route") {
			continue
		}
		pr := paramRoute{method: r.Method, path: r.Path}
		for i, seg := range strings.Split(r.Path, "/") {
			if strings.HasPrefix(seg, ":") || seg == "*" {
				pr.params = append(pr.params, i)
			}
		}
		switch {
		case len(pr.params) == 0:
		case r.Path == web.Prefix || strings.HasPrefix(r.Path, web.Prefix+"/"):
			console = append(console, pr)
		default:
			api = append(api, pr)
		}
	}
	if len(api) < 15 || len(console) < 8 {
		t.Fatalf("%d API and %d console routes with an id: is the router listing them all?", len(api), len(console))
	}
	return api, console
}

// with is the route's path with its bad parameter (the bad-th) as segment
// and every other as absentID.
func (r paramRoute) with(bad int, segment string) string {
	segs := strings.Split(r.path, "/")
	for n, i := range r.params {
		segs[i] = absentID
		if n == bad {
			segs[i] = segment
		}
	}
	return strings.Join(segs, "/")
}

// TestEveryIDThatCannotExistIs404 calls every route that takes an id in
// its path (the API's and the console's, from the router's own list) with
// ids that cannot exist, on both databases: each is the route's 404 (in
// the contract's shape, a.do checks each answer against
// docs/openapi.yaml), never a 5xx, and nothing is logged as an error.
func TestEveryIDThatCannotExistIs404(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		cc, _ := consoleAs(t, a, "ops", auth.All)
		cc.get(web.Prefix) // the session's CSRF token, for the posts
		api, console := paramRoutes(t, a.e)
		for _, r := range api {
			for bad := range r.params {
				for _, id := range impossibleIDs {
					res := a.do(r.method, r.with(bad, id.segment), `{"reason":"x","enabled":true}`, root...)
					if res.Code != http.StatusNotFound || strings.TrimSpace(res.Body.String()) != `{"message":"Not Found."}` {
						t.Errorf("%s %s with a %s id answered %d: %s", r.method, r.path, id.name, res.Code, res.Body.String())
					}
				}
			}
		}
		for _, r := range console {
			for bad := range r.params {
				for _, id := range impossibleIDs {
					var page consolePage
					if r.method == http.MethodPost {
						page = cc.post(r.with(bad, id.segment), url.Values{"reason": {"x"}})
					} else {
						page = cc.send(r.method, r.with(bad, id.segment), nil)
					}
					if page.Status != http.StatusNotFound || !strings.Contains(page.Body, "There is no such page.") {
						t.Errorf("%s %s with a %s id answered %d: %.300s", r.method, r.path, id.name, page.Status, page.Body)
					}
				}
			}
		}
		wantNoErrorLogged(t, a)
	})
}

// cursorWith is a licenses cursor as the API writes one, naming id.
func cursorWith(t *testing.T, id string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"created_at": "2026-11-30T10:00:00.000000Z", "id": id, "_pointsToNextItems": true})
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestEveryIDInTheQueryThatCannotExistIsRefused sends ids that cannot exist
// where a query parameter names a row: a licenses cursor whose id is one
// is a 422 on cursor, an events feed's after a 422 on after (bare or
// behind the events' prefix), a token's events filter lists nothing. Then
// every filter of every listing takes each of them without a 5xx, on
// both databases.
func TestEveryIDInTheQueryThatCannotExistIsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		root := bearer(a.token("root", auth.All))
		for _, id := range impossibleIDs {
			a.do(http.MethodGet, "/api/licenses?cursor="+cursorWith(t, id.raw), "", root...).wantStatus(http.StatusUnprocessableEntity)
			if strings.TrimSpace(id.raw) != "" { // blank is no after at all, as Laravel trims it to null
				a.do(http.MethodGet, "/api/events?after="+url.QueryEscape(id.raw), "", root...).wantStatus(http.StatusUnprocessableEntity)
			}
			a.do(http.MethodGet, "/api/events?after=evt_"+url.QueryEscape(id.raw), "", root...).wantStatus(http.StatusUnprocessableEntity)
			got := a.do(http.MethodGet, "/api/tokens/events?token="+url.QueryEscape(id.raw), "", root...).wantStatus(http.StatusOK).json()
			if data, _ := got["data"].([]any); len(data) != 0 {
				t.Errorf("the events of a %s token id: %v, want none", id.name, data)
			}
		}

		cc, _ := consoleAs(t, a, "ops", auth.All)
		filters := []string{"consumer", "status", "operation", "type", "domain", "older_than", "age", "token", "after", "cursor", "page", "per_page", "done"}
		for _, r := range a.e.Routes() {
			if r.Method != http.MethodGet || strings.Contains(r.Path, ":") || strings.Contains(r.Path, "*") {
				continue
			}
			for _, f := range filters {
				for _, id := range impossibleIDs {
					path := r.Path + "?" + f + "=" + url.QueryEscape(id.raw)
					status := 0
					if r.Path == web.Prefix || strings.HasPrefix(r.Path, web.Prefix+"/") {
						status = cc.get(path).Status
					} else {
						status = a.do(http.MethodGet, path, "", root...).Code
					}
					if status >= 500 {
						t.Errorf("GET %s with a %s %s answered %d", r.Path, id.name, f, status)
					}
				}
			}
		}
		wantNoErrorLogged(t, a)
	})
}

// wantNoErrorLogged fails the test if the server logged an error: a
// request refused is not one.
func wantNoErrorLogged(t *testing.T, a *app) {
	t.Helper()
	n := 0
	for line := range strings.SplitSeq(a.logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			if n++; n <= 3 {
				t.Errorf("the server logged an error: %.500s", line)
			}
		}
	}
	if n > 3 {
		t.Errorf("and %d more errors", n-3)
	}
}
