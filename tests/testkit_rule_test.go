package tests

import (
	"slices"
	"strings"
	"testing"
)

// testkitPath is the test-support package: tests import it, production code never.
const testkitPath = module + "/internal/testkit"

// internal/testkit is for tests alone: no package's non-test code imports
// it (it may appear in TestImports and XTestImports only), and it imports
// the standard library alone, so that it drags nothing into a test binary.
func TestTestkitOnlyInTests(t *testing.T) {
	usedBy := 0
	found := false
	for _, p := range listPackages(t) {
		if slices.Contains(p.Imports, testkitPath) {
			t.Errorf("%s imports %s outside its tests; only _test.go files may", p.ImportPath, testkitPath)
		}
		if slices.Contains(p.TestImports, testkitPath) || slices.Contains(p.XTestImports, testkitPath) {
			usedBy++
		}
		if p.ImportPath != testkitPath {
			continue
		}
		found = true
		for _, imp := range p.Imports {
			if strings.Contains(strings.Split(imp, "/")[0], ".") || strings.HasPrefix(imp, module) {
				t.Errorf("%s imports %s; it may import the standard library only", testkitPath, imp)
			}
		}
	}
	if !found {
		t.Fatalf("go list does not show %s: is the rule looking at the right module?", testkitPath)
	}
	if usedBy < 2 {
		t.Errorf("the tests of %d packages import %s, want it shared by several", usedBy, testkitPath)
	}
}
