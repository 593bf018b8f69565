package wait

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestJitterBounded(t *testing.T) {
	for _, d := range []time.Duration{0, 1, time.Millisecond, time.Minute} {
		for range 1000 {
			if got := Jitter(d); got < 0 || got > d {
				t.Fatalf("Jitter(%v) = %v, want within [0, %v]", d, got, d)
			}
		}
	}
	if got := Jitter(-time.Second); got != 0 {
		t.Errorf("Jitter(-1s) = %v, want 0", got)
	}
}

func TestSleepStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on an ended context = %v, want context.Canceled at once", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v, want nil", err)
	}
}

func TestRetryAfter(t *testing.T) {
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
		got, given := RetryAfter(tt.in, now)
		if got != tt.want || given != tt.wantGiven {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, given, tt.want, tt.wantGiven)
		}
	}
}
