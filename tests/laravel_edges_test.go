package tests

import (
	"bufio"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/auth"
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
