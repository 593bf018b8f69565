package tests

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// The golden tests of the JSON shapes the API shares with Laravel: each
// expected body is written out literally and compared byte for byte (so key
// order counts), after only what varies from run to run is normalised.

var (
	reULID      = regexp.MustCompile(`"id":"[0-9A-HJKMNP-TV-Z]{26}"`)
	reStamp     = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"`) // Laravel's format, exactly
	reKey       = regexp.MustCompile(`"license_key":"LK-[^"]*"`)
	reSite      = regexp.MustCompile(`"vendor_site_id":"site_\d+"`)
	reCursor    = regexp.MustCompile(`cursor=[A-Za-z0-9_-]+"`)
	reCursorVal = regexp.MustCompile(`"(next|prev)_cursor":"[A-Za-z0-9_-]+"`)
)

// normalise replaces ids, times, keys, site ids and cursors with fixed
// placeholders; a time in any other format than Laravel's stays as it is
// and fails the comparison.
func normalise(body string) string {
	body = reULID.ReplaceAllString(body, `"id":"ID"`)
	body = reStamp.ReplaceAllString(body, `"TS"`)
	body = reKey.ReplaceAllString(body, `"license_key":"KEY"`)
	body = reSite.ReplaceAllString(body, `"vendor_site_id":"SITE"`)
	body = reCursor.ReplaceAllString(body, `cursor=CURSOR"`)
	return reCursorVal.ReplaceAllString(body, `"${1}_cursor":"CURSOR"`)
}

func wantGolden(t *testing.T, r *response, status int, want string) {
	t.Helper()
	r.wantStatus(status)
	if got := normalise(r.Body.String()); got != want {
		t.Errorf("body differs from the golden one\n got: %s\nwant: %s", got, want)
	}
}

// goldenLicense is one normalised license of the list.
func goldenLicense(i int) string {
	return fmt.Sprintf(`{"id":"ID","name":"N","domain":"shop%02d.test","license_key":"KEY","status":"active","vendor_site_id":"SITE","created_at":"TS","updated_at":"TS"}`, i)
}

// goldenData is the data array of licenses from down to to, newest first.
func goldenData(from, to int) string {
	var items []string
	for i := from; i >= to; i-- {
		items = append(items, goldenLicense(i))
	}
	return "[" + strings.Join(items, ",") + "]"
}

const listPath = testIssuer + "/api/licenses"

// laravelTime is the layout of every time the API renders: Laravel's,
// microseconds always, UTC as Z.
const laravelTime = "2006-01-02T15:04:05.000000Z"

func TestGoldenLicenseList(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		for i := range 42 {
			a.create(acme, fmt.Sprintf("shop%02d.test", i))
		}
		t.Run("first page", func(t *testing.T) {
			wantGolden(t, a.do(http.MethodGet, "/api/licenses", "", acme...), http.StatusOK,
				`{"data":`+goldenData(41, 27)+`,`+
					`"links":{"first":"http://licensor.test/api/licenses?page=1","last":"http://licensor.test/api/licenses?page=3","prev":null,"next":"http://licensor.test/api/licenses?page=2"},`+
					`"meta":{"current_page":1,"from":1,"last_page":3,"links":[`+
					`{"url":null,"label":"&laquo; Previous","page":null,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=1","label":"1","page":1,"active":true},`+
					`{"url":"http://licensor.test/api/licenses?page=2","label":"2","page":2,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=3","label":"3","page":3,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=2","label":"Next &raquo;","page":2,"active":false}],`+
					`"path":"http://licensor.test/api/licenses","per_page":15,"to":15,"total":42}}`)
		})
		t.Run("last page", func(t *testing.T) {
			wantGolden(t, a.do(http.MethodGet, "/api/licenses?page=3", "", acme...), http.StatusOK,
				`{"data":`+goldenData(11, 0)+`,`+
					`"links":{"first":"http://licensor.test/api/licenses?page=1","last":"http://licensor.test/api/licenses?page=3","prev":"http://licensor.test/api/licenses?page=2","next":null},`+
					`"meta":{"current_page":3,"from":31,"last_page":3,"links":[`+
					`{"url":"http://licensor.test/api/licenses?page=2","label":"&laquo; Previous","page":2,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=1","label":"1","page":1,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=2","label":"2","page":2,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=3","label":"3","page":3,"active":true},`+
					`{"url":null,"label":"Next &raquo;","page":null,"active":false}],`+
					`"path":"http://licensor.test/api/licenses","per_page":15,"to":42,"total":42}}`)
		})
		t.Run("past the last page", func(t *testing.T) {
			wantGolden(t, a.do(http.MethodGet, "/api/licenses?page=5", "", acme...), http.StatusOK,
				`{"data":[],`+
					`"links":{"first":"http://licensor.test/api/licenses?page=1","last":"http://licensor.test/api/licenses?page=3","prev":"http://licensor.test/api/licenses?page=4","next":null},`+
					`"meta":{"current_page":5,"from":null,"last_page":3,"links":[`+
					`{"url":"http://licensor.test/api/licenses?page=4","label":"&laquo; Previous","page":4,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=1","label":"1","page":1,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=2","label":"2","page":2,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=3","label":"3","page":3,"active":false},`+
					`{"url":null,"label":"Next &raquo;","page":null,"active":false}],`+
					`"path":"http://licensor.test/api/licenses","per_page":15,"to":null,"total":42}}`)
		})
		t.Run("sliding window, per_page kept in the links", func(t *testing.T) {
			u := func(p int) string { return fmt.Sprintf(`"http://licensor.test/api/licenses?per_page=2&page=%d"`, p) }
			link := func(p int, active bool) string {
				return fmt.Sprintf(`{"url":%s,"label":"%d","page":%d,"active":%t}`, u(p), p, p, active)
			}
			dots := `{"url":null,"label":"...","active":false}`
			links := []string{`{"url":` + u(10) + `,"label":"&laquo; Previous","page":10,"active":false}`, link(1, false), link(2, false), dots}
			for p := 8; p <= 14; p++ {
				links = append(links, link(p, p == 11))
			}
			links = append(links, dots, link(20, false), link(21, false), `{"url":`+u(12)+`,"label":"Next &raquo;","page":12,"active":false}`)
			wantGolden(t, a.do(http.MethodGet, "/api/licenses?per_page=2&page=11", "", acme...), http.StatusOK,
				`{"data":`+goldenData(21, 20)+`,`+
					`"links":{"first":`+u(1)+`,"last":`+u(21)+`,"prev":`+u(10)+`,"next":`+u(12)+`},`+
					`"meta":{"current_page":11,"from":21,"last_page":21,"links":[`+strings.Join(links, ",")+`],`+
					`"path":"http://licensor.test/api/licenses","per_page":2,"to":22,"total":42}}`)
		})
		t.Run("window near either end", func(t *testing.T) {
			for q, want := range map[string]string{
				"per_page=2&page=1":  "&laquo; Previous,[1],2,3,4,5,6,7,8,9,10,...,20,21,Next &raquo;",
				"per_page=2&page=7":  "&laquo; Previous,1,2,3,4,5,6,[7],8,9,10,...,20,21,Next &raquo;",
				"per_page=2&page=8":  "&laquo; Previous,1,2,...,5,6,7,[8],9,10,11,...,20,21,Next &raquo;",
				"per_page=2&page=15": "&laquo; Previous,1,2,...,12,13,14,[15],16,17,18,19,20,21,Next &raquo;",
				"per_page=2&page=21": "&laquo; Previous,1,2,...,12,13,14,15,16,17,18,19,20,[21],Next &raquo;",
				"per_page=4&page=11": "&laquo; Previous,1,2,3,4,5,6,7,8,9,10,[11],Next &raquo;",
			} {
				var labels []string
				for _, l := range a.do(http.MethodGet, "/api/licenses?"+q, "", acme...).wantStatus(http.StatusOK).json()["meta"].(map[string]any)["links"].([]any) {
					l := l.(map[string]any)
					label := l["label"].(string)
					if l["active"] == true {
						label = "[" + label + "]"
					}
					labels = append(labels, label)
				}
				if got := strings.Join(labels, ","); got != want {
					t.Errorf("%s: links %s, want %s", q, got, want)
				}
			}
		})
		t.Run("no licenses", func(t *testing.T) {
			wantGolden(t, a.do(http.MethodGet, "/api/licenses", "", a.consumer("initech")...), http.StatusOK,
				`{"data":[],`+
					`"links":{"first":"http://licensor.test/api/licenses?page=1","last":"http://licensor.test/api/licenses?page=1","prev":null,"next":null},`+
					`"meta":{"current_page":1,"from":null,"last_page":1,"links":[`+
					`{"url":null,"label":"&laquo; Previous","page":null,"active":false},`+
					`{"url":"http://licensor.test/api/licenses?page=1","label":"1","page":1,"active":true},`+
					`{"url":null,"label":"Next &raquo;","page":null,"active":false}],`+
					`"path":"http://licensor.test/api/licenses","per_page":15,"to":null,"total":0}}`)
		})
	})
}

func TestGoldenCursorList(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		for i := range 42 {
			a.create(acme, fmt.Sprintf("shop%02d.test", i))
		}
		first := a.do(http.MethodGet, "/api/licenses?cursor=", "", acme...)
		wantGolden(t, first, http.StatusOK, `{"data":`+goldenData(41, 27)+`,`+
			`"links":{"first":null,"last":null,"prev":null,"next":"http://licensor.test/api/licenses?cursor=CURSOR"},`+
			`"meta":{"path":"http://licensor.test/api/licenses","per_page":15,"next_cursor":"CURSOR","prev_cursor":null}}`)

		next := func(r *response, rel string) string {
			r.t.Helper()
			link, _ := r.json()["links"].(map[string]any)[rel].(string)
			if !strings.HasPrefix(link, listPath+"?") || !strings.Contains(link, "cursor=") {
				r.t.Fatalf("links.%s = %q", rel, link)
			}
			return strings.TrimPrefix(link, testIssuer)
		}
		second := a.do(http.MethodGet, next(first, "next"), "", acme...)
		wantGolden(t, second, http.StatusOK, `{"data":`+goldenData(26, 12)+`,`+
			`"links":{"first":null,"last":null,"prev":"http://licensor.test/api/licenses?cursor=CURSOR","next":"http://licensor.test/api/licenses?cursor=CURSOR"},`+
			`"meta":{"path":"http://licensor.test/api/licenses","per_page":15,"next_cursor":"CURSOR","prev_cursor":"CURSOR"}}`)
		third := a.do(http.MethodGet, next(second, "next"), "", acme...)
		wantGolden(t, third, http.StatusOK, `{"data":`+goldenData(11, 0)+`,`+
			`"links":{"first":null,"last":null,"prev":"http://licensor.test/api/licenses?cursor=CURSOR","next":null},`+
			`"meta":{"path":"http://licensor.test/api/licenses","per_page":15,"next_cursor":null,"prev_cursor":"CURSOR"}}`)
		// Back from the third page: the second again, then the first, whose
		// prev is null as Laravel's is once nothing lies before it.
		back := a.do(http.MethodGet, next(third, "prev"), "", acme...)
		if got, want := normalise(back.Body.String()), normalise(second.Body.String()); got != want {
			t.Errorf("prev of page 3 = %s, want page 2 %s", got, want)
		}
		wantGolden(t, a.do(http.MethodGet, next(back, "prev"), "", acme...), http.StatusOK, `{"data":`+goldenData(41, 27)+`,`+
			`"links":{"first":null,"last":null,"prev":null,"next":"http://licensor.test/api/licenses?cursor=CURSOR"},`+
			`"meta":{"path":"http://licensor.test/api/licenses","per_page":15,"next_cursor":"CURSOR","prev_cursor":null}}`)

		t.Run("per_page kept", func(t *testing.T) {
			r := a.do(http.MethodGet, "/api/licenses?per_page=40&cursor=", "", acme...)
			wantGolden(t, a.do(http.MethodGet, next(r, "next"), "", acme...), http.StatusOK, `{"data":`+goldenData(1, 0)+`,`+
				`"links":{"first":null,"last":null,"prev":"http://licensor.test/api/licenses?per_page=40&cursor=CURSOR","next":null},`+
				`"meta":{"path":"http://licensor.test/api/licenses","per_page":40,"next_cursor":null,"prev_cursor":"CURSOR"}}`)
		})
		t.Run("one page only", func(t *testing.T) {
			wantGolden(t, a.do(http.MethodGet, "/api/licenses?cursor=", "", a.consumer("initech")...), http.StatusOK, `{"data":[],`+
				`"links":{"first":null,"last":null,"prev":null,"next":null},`+
				`"meta":{"path":"http://licensor.test/api/licenses","per_page":15,"next_cursor":null,"prev_cursor":null}}`)
		})
		t.Run("malformed cursor", func(t *testing.T) {
			msg := `The cursor field must be a cursor from a previous page's links or meta.`
			for _, c := range []string{"x", "!!!", "eyJpZCI6IiJ9", "bnVsbA"} {
				wantGolden(t, a.do(http.MethodGet, "/api/licenses?cursor="+c, "", acme...), http.StatusUnprocessableEntity,
					`{"message":"`+msg+`","errors":{"cursor":["`+msg+`"]}}`)
			}
		})
	})
}

func TestGoldenValidation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		post := func(body string) *response { return a.do(http.MethodPost, "/api/licenses", body, acme...) }
		wantGolden(t, post(`{"name":123,"domain":[1]}`), http.StatusUnprocessableEntity,
			`{"message":"The name field must be a string. (and 1 more error)","errors":{"name":["The name field must be a string."],"domain":["The domain field must be a string."]}}`)
		wantGolden(t, post(`{"domain":{"a":1},"name":true}`), http.StatusUnprocessableEntity,
			`{"message":"The name field must be a string. (and 1 more error)","errors":{"name":["The name field must be a string."],"domain":["The domain field must be a string."]}}`)
		wantGolden(t, post(`{"name":false,"domain":"acme.test"}`), http.StatusUnprocessableEntity,
			`{"message":"The name field must be a string.","errors":{"name":["The name field must be a string."]}}`)
		wantGolden(t, post(`{"name":123,"domain":"http://a.test/x"}`), http.StatusUnprocessableEntity,
			`{"message":"The name field must be a string. (and 1 more error)","errors":{"name":["The name field must be a string."],"domain":["The domain field must be a valid domain name, such as acme.test (no scheme, path, port or IP address)."]}}`)
		// Rule order, not alphabetical order: name before domain.
		wantGolden(t, post(`{"name":null}`), http.StatusUnprocessableEntity,
			`{"message":"The name field is required. (and 1 more error)","errors":{"name":["The name field is required."],"domain":["The domain field is required."]}}`)
		wantGolden(t, post(`{"name":"Acme","domain":7}`), http.StatusUnprocessableEntity,
			`{"message":"The domain field must be a string.","errors":{"domain":["The domain field must be a string."]}}`)
		// page=0 is page 1 (Paginator::resolveCurrentPage); per_page has Laravel's max message.
		wantGolden(t, a.do(http.MethodGet, "/api/licenses?per_page=101&page=0", "", acme...), http.StatusUnprocessableEntity,
			`{"message":"The per page field must not be greater than 100.","errors":{"per_page":["The per page field must not be greater than 100."]}}`)
		a.wantVendorCalls("", 0)
	})
}

func TestGoldenTimestamps(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		a := newApp(t, db, withClock(clk))
		acme := a.consumer("acme")
		r := a.do(http.MethodPost, "/api/licenses", `{"name":"AT&T <Acme>","domain":"acme.test"}`, acme...)
		want := `{"data":{"id":"ID","name":"AT&T <Acme>","domain":"acme.test","license_key":"KEY","status":"active","vendor_site_id":"SITE",` +
			`"created_at":"2026-11-30T10:00:00.000000Z","updated_at":"2026-11-30T10:00:00.000000Z"}}`
		r.wantStatus(http.StatusCreated)
		got := reKey.ReplaceAllString(reSite.ReplaceAllString(reULID.ReplaceAllString(r.Body.String(), `"id":"ID"`), `"vendor_site_id":"SITE"`), `"license_key":"KEY"`)
		if got != want {
			t.Errorf("body\n got: %s\nwant: %s", got, want)
		}
		clk.Advance(1500 * time.Microsecond)
		id := r.licenseData()["id"].(string)
		a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
		show := a.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()
		if show["updated_at"] != "2026-11-30T10:00:00.001500Z" {
			t.Errorf("updated_at = %v, want 2026-11-30T10:00:00.001500Z", show["updated_at"])
		}
	})
}
