package tests

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/auth"
)

// consoleClient is a browser's worth of the operator console over real
// HTTP: a cookie jar, no redirects followed (a test sees each 303), and the
// CSRF token of the last page read.
type consoleClient struct {
	t    *testing.T
	srv  *httptest.Server
	http *http.Client
	csrf string
	once string // the last page's issue form's own value (a browser sends the form it shows)
}

// consolePage is a console response, its body read.
type consolePage struct {
	Status int
	Header http.Header
	Body   string
}

// newConsoleClient serves the app on a loopback port for a console client.
func newConsoleClient(t *testing.T, a *app) *consoleClient {
	t.Helper()
	srv := httptest.NewServer(a.e)
	t.Cleanup(srv.Close)
	return newConsoleClientOn(t, srv)
}

// newConsoleClientOn is a second browser on the same server.
func newConsoleClientOn(t *testing.T, srv *httptest.Server) *consoleClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleClient{t: t, srv: srv, http: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var (
	csrfInput = regexp.MustCompile(`name="_token" value="([^"]+)"`)
	onceInput = regexp.MustCompile(`name="once" value="([^"]+)"`)
)

// get reads a console page; its CSRF token is kept for the next post.
func (cc *consoleClient) get(path string) consolePage {
	cc.t.Helper()
	return cc.send(http.MethodGet, path, nil)
}

// post sends a form with the CSRF token of the last page read (unless the
// form sets _token itself, or sets it to "" to send none), and the headers
// (name, value pairs) over a browser's same-site ones.
func (cc *consoleClient) post(path string, form url.Values, headers ...string) consolePage {
	cc.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, set := form["_token"]; !set {
		form.Set("_token", cc.csrf)
	}
	if _, set := form["once"]; !set && cc.once != "" {
		form.Set("once", cc.once)
	}
	if form.Get("_token") == "" {
		form.Del("_token")
	}
	return cc.send(http.MethodPost, path, strings.NewReader(form.Encode()), headers...)
}

func (cc *consoleClient) send(method, path string, body io.Reader, headers ...string) consolePage {
	cc.t.Helper()
	req, err := http.NewRequest(method, cc.srv.URL+path, body)
	if err != nil {
		cc.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", cc.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := cc.http.Do(req)
	if err != nil {
		cc.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		cc.t.Fatal(err)
	}
	page := consolePage{Status: res.StatusCode, Header: res.Header, Body: string(b)}
	if m := csrfInput.FindStringSubmatch(page.Body); m != nil {
		cc.csrf = html.UnescapeString(m[1])
	}
	if m := onceInput.FindStringSubmatch(page.Body); m != nil {
		cc.once = html.UnescapeString(m[1])
	}
	return page
}

// signIn opens a session with token, failing the test unless it is opened.
func (cc *consoleClient) signIn(token string) {
	cc.t.Helper()
	if p := cc.trySignIn(token); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console" {
		cc.t.Fatalf("sign in: status %d, Location %q; body: %s", p.Status, p.Header.Get("Location"), p.Body)
	}
}

// trySignIn posts token to the sign-in form, as an operator pastes it;
// both requests carry the headers (name, value pairs).
func (cc *consoleClient) trySignIn(token string, headers ...string) consolePage {
	cc.t.Helper()
	cc.send(http.MethodGet, "/console/login", nil, headers...)
	return cc.post("/console/login", url.Values{"token": {token}}, headers...)
}

// wantStatus fails the test unless the page answered want, and marks it
// failed for each of texts (HTML source) its body lacks.
func (p consolePage) wantStatus(t *testing.T, want int, texts ...string) consolePage {
	t.Helper()
	if p.Status != want {
		t.Fatalf("status = %d, want %d; body: %s", p.Status, want, p.Body)
	}
	wantAll(t, "the page", p.Body, texts...)
	return p
}

// wantAll marks the test failed for each of wants that s (what) lacks.
func wantAll(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s has no %q: %.3000s", what, w, s)
		}
	}
}

// sectionRow is the table row of the element id on a page.
func sectionRow(t *testing.T, body, id string) string {
	t.Helper()
	start := strings.Index(body, `<tr id="`+id+`">`)
	if start < 0 {
		t.Fatalf("no row %s: %s", id, body)
	}
	return body[start : start+strings.Index(body[start:], "</tr>")]
}

// consoleAs is a browser signed in to the console with a fresh token of
// the abilities, and that token's row.
func consoleAs(t *testing.T, a *app, consumer string, abilities ...string) (*consoleClient, auth.Issued) {
	t.Helper()
	tok := a.issued(consumer, abilities...)
	cc := newConsoleClient(t, a)
	cc.signIn(tok.Secret)
	return cc, tok
}

// wantSignIn fails the test unless the page sent the browser to sign in.
func (p consolePage) wantSignIn(t *testing.T) {
	t.Helper()
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/console/login") {
		t.Fatalf("want a redirect to the sign-in page, got %d Location %q; body: %s", p.Status, p.Header.Get("Location"), p.Body)
	}
}
