package console

import (
	"testing"
)

// A version and a commit stamped at link time (-ldflags -X, as the
// Dockerfile does) replace what the build information says; unstamped, it
// stands.
func TestVersionStamped(t *testing.T) {
	built := buildVersion{Version: "devel", Commit: unknown, Modified: true, Go: "go1.27.3"}
	got := built.stamped("v1.4.0", "0123abcd")
	if want := (buildVersion{Version: "v1.4.0", Commit: "0123abcd", Go: "go1.27.3"}); got != want {
		t.Errorf("stamped = %+v, want %+v", got, want)
	}
	if got := built.stamped("", ""); got != built {
		t.Errorf("unstamped = %+v, want the build's %+v", got, built)
	}
	if got := readBuildVersion(); stampedVersion == "" && got.Version == "v1.4.0" {
		t.Errorf("readBuildVersion = %+v without a stamp", got)
	}
}
