package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The image's build has no .git: the Dockerfile stamps VERSION and COMMIT
// with -ldflags -X, and `licensor version` prints them instead of devel.
// Built here the same way (-buildvcs=false, as without .git).
func TestVersionStampedByLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "licensor")
	ldflags := "-s -w -X " + versionVar + "=v9.8.7 -X " + commitVar + "=feedface"
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("licensor version: %v", err)
	}
	for _, want := range []string{"version  v9.8.7\n", "commit   feedface\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("licensor version printed:\n%s\nwant %q", out, want)
		}
	}
}
