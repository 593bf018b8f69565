package webhooks

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// rawListener accepts connections on 127.0.0.1 and hands each to handle;
// it returns the address. Connections still open are closed at the end.
func rawListener(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go handle(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// readRequest reads what a client sent up to the end of its headers.
func readRequest(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}

// Each way an attempt can fail is stored and shown as its class, with real
// listeners behind each: a refused port, one that never answers, one that
// resets the connection, a TLS server whose certificate is not trusted, a
// 500, a 302, a name that does not resolve, an endpoint whose secret cannot
// be opened and an answer that is not HTTP. No attempt names an address or
// a port; the operator's log has the detail, never the URL's query.
func TestAttemptErrorsAreClasses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		refused := testkit.FreeAddr(t)
		silent := rawListener(t, func(c net.Conn) { readRequest(c) }) // and nothing more, until the end
		reset := rawListener(t, func(c net.Conn) {
			readRequest(c)
			_ = c.(*net.TCPConn).SetLinger(0) // close with a RST
			_ = c.Close()
		})
		garbage := rawListener(t, func(c net.Conn) {
			readRequest(c)
			_, _ = c.Write([]byte("hello, this is no HTTP\r\n\r\n"))
			_ = c.Close()
		})
		tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		t.Cleanup(tlsSrv.Close)
		status := newReceiver(t, failing(http.StatusInternalServerError, 1))
		redirect := newReceiver(t, func(_ int, w http.ResponseWriter) int {
			w.Header().Set("Location", "https://elsewhere.example/")
			return http.StatusFound
		})
		secretGone := newReceiver(t, nil)

		logs := &testkit.Buffer{}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
			if host == "empty.example" {
				return nil, nil
			}
			return nil, errors.New("no such host")
		}
		// Long enough for every answer, a TLS handshake under the race
		// detector on a loaded machine included: only the silent endpoint,
		// below, is given a short timeout.
		r := newRig(t, db, Config{Timeout: 10 * time.Second, Log: log, Policy: Policy{Resolve: resolve}})
		c := r.consumer("ca")
		const query = "?key=s3cret-of-the-consumer"
		want := map[string]string{} // endpoint id → its attempt's error
		for url, class := range map[string]string{
			"http://" + refused + "/h": FailureConnectionRefused,
			"http://" + reset + "/h":   FailureConnectionReset,
			tlsSrv.URL + "/h":          FailureTLS,
			"https://" + status.srv.Listener.Addr().String() + "/h": FailureTLS, // plain HTTP behind https://
			status.url():                 FailureHTTPStatus,
			redirect.url():               FailureRedirect,
			"http://nowhere.example:1/h": FailureDNS,
			"http://empty.example:1/h":   FailureDNS,
			"http://" + garbage + "/h":   FailureOther,
			secretGone.url():             FailureInternal,
		} {
			want[r.endpoint(c, url+query).ID] = class
		}
		var gone string
		for id, class := range want {
			if class == FailureInternal {
				gone = id
			}
		}
		must(t, db.Gorm.Exec("UPDATE webhook_endpoints SET secret = ? WHERE id = ?", "not sealed", gone).Error)
		r.license(c, "a.test")
		r.dispatch()
		if n := r.deliver(); n != len(want) {
			t.Fatalf("claimed %d, want %d", n, len(want))
		}
		for id, class := range want {
			ds := r.deliveries(id)
			if len(ds) != 1 {
				t.Fatalf("endpoint %s (%s): %d deliveries, want 1", id, class, len(ds))
			}
			as := r.attempts(ds[0].ID)
			if len(as) != 1 || as[0].Error == nil || *as[0].Error != class {
				t.Errorf("%s: attempts %+v, want one failed as %q", class, as, class)
				continue
			}
			if answered := class == FailureHTTPStatus || class == FailureRedirect; answered != (as[0].ResponseStatus != nil) {
				t.Errorf("%s: response_status %v, want one only when there was an answer", class, as[0].ResponseStatus)
			}
			if !slices.Contains(Failures, *as[0].Error) {
				t.Errorf("%s is not one of Failures %v", *as[0].Error, Failures)
			}
		}
		// No answer within the timeout: a worker of its own with a short one.
		quick := newRig(t, db, Config{Timeout: 300 * time.Millisecond, Log: log})
		waits := quick.endpoint(quick.consumer("cb"), "http://"+silent+"/h"+query)
		quick.license("cb", "b.test")
		quick.dispatch()
		quick.deliver()
		if ds := quick.deliveries(waits.ID); len(ds) != 1 {
			t.Errorf("the silent endpoint has %d deliveries, want 1", len(ds))
		} else if as := quick.attempts(ds[0].ID); len(as) != 1 || as[0].Error == nil || *as[0].Error != FailureTimeout || as[0].ResponseStatus != nil {
			t.Errorf("timeout: attempts %+v, want one failed as %q, without an answer", as, FailureTimeout)
		}
		if secretGone.count() != 0 {
			t.Errorf("the endpoint whose secret could not be opened got %d requests", secretGone.count())
		}
		got := logs.String()
		if strings.Contains(got, "s3cret") {
			t.Errorf("the log shows a URL's query:\n%s", got)
		}
		for _, detail := range []string{"class=connection_refused", "connection refused", "class=dns", "no such host", "class=tls",
			"certificate", "level=WARN msg=\"webhook attempt failed\"", refused} {
			if !strings.Contains(got, detail) {
				t.Errorf("the log lacks %q:\n%s", detail, got)
			}
		}
	})
}

// The classes are a closed set, every one documented.
func TestFailuresAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Failures {
		if seen[f] || f == "" || strings.ToLower(f) != f || strings.ContainsAny(f, " .:/") {
			t.Errorf("class %q: want distinct lower-case words", f)
		}
		seen[f] = true
	}
}
