package sim

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMutantsApply keeps the re-introduced bugs of tests/mutants current:
// each patch must still apply to the code as it is, or the proof that the
// checkers can fail (docs/reliability.md, "Re-introduced bugs") has gone
// stale without anyone noticing.
func TestMutantsApply(t *testing.T) {
	patches, err := filepath.Glob("../mutants/*.patch")
	if err != nil || len(patches) != 4 {
		t.Fatalf("tests/mutants holds %d patches (%v); want the four", len(patches), err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: the patches cannot be checked")
	}
	if exec.Command("git", "-C", "../..", "rev-parse", "--git-dir").Run() != nil {
		t.Skip("not a git checkout")
	}
	for _, p := range patches {
		abs, _ := filepath.Abs(p)
		if out, err := exec.Command("git", "-C", "../..", "apply", "--check", abs).CombinedOutput(); err != nil {
			t.Errorf("%s no longer applies: %v\n%s", filepath.Base(p), err, out)
		}
	}
}
