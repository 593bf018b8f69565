package tests

import (
	"regexp"
	"strings"
	"testing"
)

// readmeBuild is README.md and where it builds the binary; a README that
// never shows the build fails the test.
func readmeBuild(t *testing.T) (readme string, build int) {
	t.Helper()
	readme = readRepoFile(t, "README.md")
	if build = strings.Index(readme, "go build -o licensor ."); build < 0 {
		t.Fatal("README.md never shows `go build -o licensor .`")
	}
	return readme, build
}

// A newcomer reads the README from the top: the first `licensor <command>`
// it shows (in prose or in a shell block) must come after the line that
// builds the binary, or the command is "not found" on a fresh machine.
func TestReadmeBuildsBinaryBeforeFirstLicensorCommand(t *testing.T) {
	readme, build := readmeBuild(t)
	// `licensor reconcile` in prose, or a line of a block running licensor.
	first := regexp.MustCompile("(?m)`licensor [a-z]|^\\s*(\\./)?licensor [a-z]").FindStringIndex(readme)
	if first == nil {
		t.Fatal("README.md shows no licensor command")
	}
	if first[0] < build {
		line := strings.Count(readme[:first[0]], "\n") + 1
		t.Errorf("README.md line %d uses `licensor` before `go build -o licensor .` builds it", line)
	}
}

// The first build compiles SQLite (pure Go) for minutes with nothing on the
// terminal: the README says so before a newcomer waits on it, and how to
// see its progress.
func TestReadmeSaysTheFirstBuildTakesMinutes(t *testing.T) {
	readme, _ := readmeBuild(t)
	firstRun := strings.Index(readme, "./licensor serve")
	for _, want := range []string{"compiles SQLite", "a few minutes", "go build -v"} {
		at := strings.Index(readme, want)
		switch {
		case at < 0:
			t.Errorf("README.md does not say %q about the first build", want)
		case firstRun >= 0 && at > firstRun:
			t.Errorf("README.md says %q only after its first ./licensor serve", want)
		}
	}
}
