package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStopsAfterMaxAttempts(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want int
	}{
		{"default", nil, DefaultMaxAttempts},
		{"3", []Option{WithMaxAttempts(3)}, 3},
		{"0 means 1", []Option{WithMaxAttempts(0)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, reply{status: 503, code: "vendor_unavailable"})
			c, rec := newTestClient(t, f, tt.opts...)
			_, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Code != "vendor_unavailable" {
				t.Fatalf("err = %v, want the last answer, an *APIError 503 vendor_unavailable", err)
			}
			if apiErr.RequestID != "req-"+strconv.Itoa(tt.want) {
				t.Errorf("RequestID = %q, want the last attempt's, req-%d", apiErr.RequestID, tt.want)
			}
			if got := len(f.requests()); got != tt.want {
				t.Errorf("requests = %d, want %d", got, tt.want)
			}
			if got := len(rec.waits); got != tt.want-1 {
				t.Errorf("waits = %d, want %d: none after the last attempt", got, tt.want-1)
			}
			if !strings.Contains(err.Error(), "gave up after") {
				t.Errorf("err = %q, want it to say it gave up", err)
			}
			assertOneKey(t, f.requests())
		})
	}
}

// TestBackoffDoublesAndIsCapped reads the waits of 8 attempts against a
// server that keeps failing without Retry-After: the step doubles from the
// base to the cap, and each wait lies in [step/2, step].
func TestBackoffDoublesAndIsCapped(t *testing.T) {
	ms := time.Millisecond
	steps := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms, 1000 * ms}
	tests := []struct {
		name   string
		jitter func(time.Duration) time.Duration
		want   func(step time.Duration) time.Duration
	}{
		{"no jitter: half the step", noJitter, func(s time.Duration) time.Duration { return s / 2 }},
		{"full jitter: the step", fullJitter, func(s time.Duration) time.Duration { return s }},
		{"jitter out of range is clamped", func(d time.Duration) time.Duration { return 10 * d }, func(s time.Duration) time.Duration { return s }},
		{"negative jitter is clamped", func(time.Duration) time.Duration { return -time.Hour }, func(s time.Duration) time.Duration { return s / 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []time.Duration
			jitter := func(d time.Duration) time.Duration { asked = append(asked, d); return tt.jitter(d) }
			f := newFakeAPI(t, reply{status: 500})
			c, rec := newTestClient(t, f, WithBackoff(100*ms, time.Second), WithJitter(jitter))
			if _, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"}); err == nil {
				t.Fatal("a server that always fails: success")
			}
			if len(rec.waits) != len(steps) {
				t.Fatalf("waits = %v, want %d", rec.waits, len(steps))
			}
			for i, step := range steps {
				if got, want := rec.waits[i], tt.want(step); got != want {
					t.Errorf("wait %d = %v, want %v (step %v)", i+1, got, want, step)
				}
				if got, want := asked[i], step/2; got != want {
					t.Errorf("jitter %d asked for up to %v, want %v: the random part is at most half the step", i+1, got, want)
				}
			}
		})
	}
}

// TestRetryAfterHonoured: a Retry-After longer than the backoff is the
// wait; a shorter one leaves the backoff.
func TestRetryAfterHonoured(t *testing.T) {
	tests := []struct {
		name  string
		first reply
		base  time.Duration
		want  time.Duration
	}{
		{"503 Retry-After 3 over a 100ms backoff", reply{status: 503, header: map[string]string{"Retry-After": "3"}}, 200 * time.Millisecond, 3 * time.Second},
		{"429 Retry-After 2", reply{status: 429, header: map[string]string{"Retry-After": "2"}}, 200 * time.Millisecond, 2 * time.Second},
		{"202 pending Retry-After 5", reply{status: 202, code: CodeOperationPending, header: map[string]string{"Retry-After": "5"}}, 200 * time.Millisecond, 5 * time.Second},
		{"Retry-After 1 under a 2s backoff", reply{status: 409, code: CodeRequestInProgress, header: map[string]string{"Retry-After": "1"}}, 4 * time.Second, 2 * time.Second},
		{"429 without Retry-After: the backoff", reply{status: 429}, 200 * time.Millisecond, 100 * time.Millisecond},
		{"unreadable Retry-After: the backoff", reply{status: 503, header: map[string]string{"Retry-After": "soon"}}, 200 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI(t, tt.first, created)
			c, rec := newTestClient(t, f, WithBackoff(tt.base, time.Minute))
			if _, err := c.CreateLicense(context.Background(), CreateLicenseInput{Name: "Acme", Domain: "acme.test"}); err != nil {
				t.Fatal(err)
			}
			if len(rec.waits) != 1 || rec.waits[0] != tt.want {
				t.Errorf("waits = %v, want [%v]", rec.waits, tt.want)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in        string
		want      time.Duration
		wantGiven bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	}
	for _, tt := range tests {
		got, given := parseRetryAfter(tt.in, now)
		if got != tt.want || given != tt.wantGiven {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, given, tt.want, tt.wantGiven)
		}
	}
}

// TestDeadline: the call never outlives its context, and gives back the
// last answer with the context's error.
func TestDeadline(t *testing.T) {
	longWait := reply{status: 503, code: "vendor_unavailable", header: map[string]string{"Retry-After": "120"}}

	t.Run("a wait past the deadline is not started", func(t *testing.T) {
		f := newFakeAPI(t, longWait, created)
		c, rec := newTestClient(t, f)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.CreateLicense(ctx, CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
		assertGaveUp(t, err, context.DeadlineExceeded)
		if len(f.requests()) != 1 || len(rec.waits) != 0 {
			t.Errorf("requests = %d, waits = %v; want 1 and none", len(f.requests()), rec.waits)
		}
	})

	t.Run("the real sleep returns promptly too", func(t *testing.T) {
		f := newFakeAPI(t, longWait, created)
		c := New(f.URL, testToken) // the real sleep: it would block 120 s
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		_, err := c.CreateLicense(ctx, CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
		assertGaveUp(t, err, context.DeadlineExceeded)
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("returned after %v, want at once", elapsed)
		}
	})

	t.Run("the context ends during a wait", func(t *testing.T) {
		f := newFakeAPI(t, reply{status: 503, code: "vendor_unavailable"}, created)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var waits int
		endDuringWait := func(ctx context.Context, _ time.Duration) error {
			waits++
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
		c := New(f.URL, testToken, WithSleep(endDuringWait))
		_, err := c.CreateLicense(ctx, CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
		assertGaveUp(t, err, context.Canceled)
		if len(f.requests()) != 1 || waits != 1 {
			t.Errorf("requests = %d, waits = %d; want 1 and 1", len(f.requests()), waits)
		}
	})

	t.Run("the context ends during an attempt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body) // so that the server notices the hang-up
			cancel()
			select {
			case <-r.Context().Done(): // the client hung up
			case <-time.After(10 * time.Second): // a bound, should that fail
			}
		}))
		defer srv.Close()
		rec := &sleepRecorder{}
		c := New(srv.URL, testToken, WithSleep(rec.sleep))
		_, err := c.CreateLicense(ctx, CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if len(rec.waits) != 0 {
			t.Errorf("waits = %v, want none once the context ended", rec.waits)
		}
	})
}

// assertGaveUp checks that err is the last answer (a 503) and says why the
// call stopped.
func assertGaveUp(t *testing.T, err error, why error) {
	t.Helper()
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 503 {
		t.Errorf("err = %v, want the last answer, an *APIError 503", err)
	}
	if !errors.Is(err, why) {
		t.Errorf("err = %v, want it to wrap %v", err, why)
	}
}
