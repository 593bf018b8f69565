package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// -profile: once the warm-up is over, the measured seconds' CPU profile is
// asked of the server's PPROF_ADDR and written under -profile's directory,
// its name made safe for a file.
func TestCPUProfileIsWrittenFromThePprofAddress(t *testing.T) {
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Path + "?" + r.URL.RawQuery
		_, _ = w.Write([]byte("profile bytes"))
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "profiles")
	b := &bench{opts: options{profile: dir}}
	p := &process{name: "licensor-sqlite-main", pprof: srv.URL}
	if err := b.cpuProfile(context.Background(), p, 0, 4e9, "sqlite-fiber-licensor replay/x-round1.pprof"); err != nil {
		t.Fatal(err)
	}
	if asked != "/debug/pprof/profile?seconds=4" {
		t.Errorf("asked %q, want the measured 4 s", asked)
	}
	got, err := os.ReadFile(filepath.Join(dir, "sqlite-fiber-licensor_replay_x-round1.pprof"))
	if err != nil || string(got) != "profile bytes" {
		t.Errorf("the profile file: %q, %v", got, err)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer failing.Close()
	if err := b.cpuProfile(context.Background(), &process{name: "x", pprof: failing.URL}, 0, 1e9, "f.pprof"); err == nil {
		t.Error("a server that refused the profile was not reported")
	}
}

// -baseline: a revision is exported from git and built with its own go.mod,
// not the working tree's.
func TestBuildRevisionBuildsThatRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git and go build")
	}
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("go.mod", "module example.test/rev\n\ngo 1.22\n")
	write("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"first\") }\n")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	write("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"second\") }\n")
	git("commit", "-q", "-am", "second")

	b := &bench{root: repo, tmp: t.TempDir(), errOut: testWriter{t}}
	bin := filepath.Join(b.tmp, "built")
	if err := b.buildRevision(context.Background(), "HEAD~1", bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin).Output()
	if err != nil || string(out) != "first" {
		t.Errorf("the binary built at HEAD~1 printed %q, %v; want the first commit's", out, err)
	}
	if err := b.buildRevision(context.Background(), "no-such-rev", bin); err == nil {
		t.Error("a revision git does not know was built")
	}
}

// testWriter sends the builds' output to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
