package console

import (
	"runtime/debug"
	"testing"
)

// serve runs the collector at serveGCPercent unless GOGC is set, which
// stands as the runtime applied it.
func TestServeTunesTheCollectorUnlessGOGCIsSet(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	if got := tuneGC(func(string) string { return "" }); got != "400" {
		t.Errorf("tuneGC without GOGC = %q, want 400", got)
	}
	if p := debug.SetGCPercent(100); p != serveGCPercent {
		t.Errorf("the collector's target is %d, want %d", p, serveGCPercent)
	}
	if got := tuneGC(func(k string) string { return map[string]string{"GOGC": "150"}[k] }); got != "150" {
		t.Errorf("tuneGC with GOGC=150 = %q", got)
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC set, yet the target was changed to %d", p)
	}
}
