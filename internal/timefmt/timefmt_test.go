package timefmt

import (
	"testing"
	"time"
)

func TestOrNone(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	zero := time.Time{}
	for _, c := range []struct {
		t    *time.Time
		want string
	}{{nil, "-"}, {&zero, "-"}, {&at, "2026-12-01T09:00:00Z"}} {
		if got := OrNone(c.t, time.RFC3339, "-"); got != c.want {
			t.Errorf("OrNone(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}
