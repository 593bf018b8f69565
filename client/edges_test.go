package client

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// A request that can never be sent (here a token with a stray carriage
// return, from a CRLF file) fails at once: repeating it cannot help.
func TestUnsendableRequestIsNotRetried(t *testing.T) {
	f := newFakeAPI(t, created)
	rec := &sleepRecorder{}
	c := New(f.URL, "tok\r", WithSleep(rec.sleep), WithJitter(noJitter))
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	if err == nil {
		t.Fatal("CreateLicense succeeded with an invalid header")
	}
	if len(rec.waits) != 0 || len(f.requests()) != 0 {
		t.Errorf("waits %v, requests %d: want no retry and nothing sent", rec.waits, len(f.requests()))
	}
}

// A redirect is handed back, never followed: following it would turn the
// POST into a GET.
func TestRedirectIsNotFollowed(t *testing.T) {
	f := newFakeAPI(t, reply{status: http.StatusMovedPermanently, header: map[string]string{"Location": "/api/licenses"}})
	c, rec := newTestClient(t, f)
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusMovedPermanently {
		t.Fatalf("err = %v, want an *APIError with status 301", err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].method != http.MethodPost || len(rec.waits) != 0 {
		t.Errorf("requests %+v, waits %v: want one POST and no retry", reqs, rec.waits)
	}
}

// A server asking to wait a day is never retried early: the call stops at
// once, with no wait, and the error carries the Retry-After for the caller.
func TestRetryAfterPastTheCapStopsAtOnce(t *testing.T) {
	f := newFakeAPI(t, reply{status: 503, code: "vendor_unavailable", header: map[string]string{"Retry-After": "86400"}}, created)
	c, rec := newTestClient(t, f)
	_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	var apiErr *APIError
	if !errors.Is(err, ErrRetryAfterTooLong) || !errors.As(err, &apiErr) || apiErr.RetryAfter != 24*time.Hour {
		t.Fatalf("err = %v, want ErrRetryAfterTooLong wrapping the 503 with its Retry-After", err)
	}
	if len(rec.waits) != 0 || len(f.requests()) != 1 {
		t.Errorf("waits %v, %d requests: want no wait and no second request", rec.waits, len(f.requests()))
	}
	if MaxRetryAfter < time.Second {
		t.Error("MaxRetryAfter would ignore ordinary Retry-After values")
	}
}
