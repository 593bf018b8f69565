package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// closedAddr is a loopback address nothing listens on (a port the system
// handed out and took back), as internal/testkit.FreeAddr gives; package
// client imports nothing of the module but internal/hmacsig, its tests
// included.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A refused connection wrote nothing: the call fails at once, without a
// retry or a wait, and its error says nothing was sent (ErrNotSent), for a
// create as for a read.
func TestRefusedConnectionFailsFastNothingSent(t *testing.T) {
	rec := &sleepRecorder{}
	c := New("http://"+closedAddr(t), "tok", WithSleep(rec.sleep), WithJitter(noJitter))
	start := time.Now()
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test", IdempotencyKey: NewIdempotencyKey()})
	if !errors.Is(err, ErrNotSent) || len(rec.waits) != 0 {
		t.Errorf("create on a closed port: %v after waits %v; want ErrNotSent at once", err, rec.waits)
	}
	if _, err := c.ListLicenses(context.Background(), 1, 15); !errors.Is(err, ErrNotSent) || len(rec.waits) != 0 {
		t.Errorf("list on a closed port: %v after waits %v; want ErrNotSent at once", err, rec.waits)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to fail on a refused connection", d)
	}
}

// A connection that dies after the request was written may have been acted
// on: that error is not ErrNotSent, and it is retried (the same key makes it
// safe).
func TestErrorAfterWriteMayHaveBeenSent(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the request was read whole; no answer
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	rec := &sleepRecorder{}
	c := New("http://"+ln.Addr().String(), "tok", WithSleep(rec.sleep), WithJitter(noJitter), WithMaxAttempts(2))
	_, err = c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test", IdempotencyKey: NewIdempotencyKey()})
	if err == nil || errors.Is(err, ErrNotSent) {
		t.Errorf("create whose connection closed after the write: %v; want an error that is not ErrNotSent", err)
	}
	if len(rec.waits) != 1 {
		t.Errorf("waits %v: want the one retry the policy allows", rec.waits)
	}
}
