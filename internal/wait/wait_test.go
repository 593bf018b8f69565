package wait

import (
	"context"
	"errors"
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
