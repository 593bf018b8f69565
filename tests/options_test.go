package tests

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A plain OPTIONS (no Access-Control-Request-Method) on every path of the
// contract answers as Laravel's router does: 200, no body, Allow the path's
// methods in Router::$verbs order with HEAD wherever GET is, joined by a
// bare comma; sent over the wire through the contract client.
func TestPlainOptionsListsThePathsMethods(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(t, testdb.New(t, database.SQLite))
	srv := httptest.NewServer(a.e)
	t.Cleanup(srv.Close)
	verbs := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
	for path, item := range c.doc.Paths.Map() {
		has := map[string]bool{}
		for method := range item.Operations() {
			has[method] = true
		}
		has["HEAD"] = has["GET"]
		var want []string
		for _, v := range verbs {
			if has[v] {
				want = append(want, v)
			}
		}
		concrete := regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "01JDQ8Z7F0A2B4C6D8E0G2H4J6")
		t.Run(path, func(t *testing.T) {
			status, allow, body := plainOptions(t, srv.URL+concrete)
			if status != http.StatusOK || allow != strings.Join(want, ",") || body != "" {
				t.Errorf("OPTIONS %s = %d, Allow %q, body %q; want 200, Allow %q, no body", concrete, status, allow, body, strings.Join(want, ","))
			}
		})
	}
	for _, path := range []string{"/api/nope", "/api/tokens/x/y"} {
		if status, allow, _ := plainOptions(t, srv.URL+path); status != http.StatusNotFound || allow != "" {
			t.Errorf("OPTIONS %s = %d, Allow %q; want 404 (no route has the path), no Allow", path, status, allow)
		}
	}
	if got := contractBreaches(); slices.ContainsFunc(got, func(b string) bool { return strings.Contains(b, "OPTIONS") }) {
		t.Errorf("plain OPTIONS answers break the contract: %v", got)
	}
}

// plainOptions sends OPTIONS, without a preflight's headers, through the
// contract client.
func plainOptions(t *testing.T, url string) (status int, allow, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := contractClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Allow"), string(b)
}
