package tests

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docBlock is one ```sh or ```bash block of a document.
type docBlock struct {
	file   string
	line   int    // of the opening fence
	script string // the block's text
	notRun string // the reason of a <!-- not run: reason --> marker before it; "" runs it
}

var notRunMarker = regexp.MustCompile(`^<!--\s*not run:\s*(.+?)\s*-->$`)

// shellBlocks extracts the shell blocks of a Markdown document, with the
// marker (the last non-blank line before the fence) that exempts one.
func shellBlocks(t *testing.T, file string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		lang := strings.TrimPrefix(fence, "```")
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if lang == "sh" || lang == "bash" {
			b := docBlock{file: file, line: i + 1, script: strings.Join(lines[i+1:end], "\n") + "\n"}
			for j := i - 1; j >= 0; j-- {
				if prev := strings.TrimSpace(lines[j]); prev != "" {
					if m := notRunMarker.FindStringSubmatch(prev); m != nil {
						b.notRun = m[1]
					}
					break
				}
			}
			blocks = append(blocks, b)
		}
		i = end
	}
	return blocks
}

// docFiles are the documents whose shell blocks must run as written.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		files = append(files, filepath.Join("docs", filepath.Base(f)))
	}
	return files
}

// freshClone copies the repository's tracked files (as they are in the
// working tree) into a new directory, as a fresh clone would hold them,
// with the built binary at ./licensor.
func freshClone(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repoRoot, name)
		data, err := os.ReadFile(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		} else if err != nil {
			t.Fatal(err)
		}
		info, _ := os.Stat(src)
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "licensor"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDocsShellBlocks runs every ```sh and ```bash block of README.md and
// docs/*.md as written, one document at a time in a fresh copy of the
// repository with the binary built (./licensor, and licensor on PATH), each
// block in its own bash with -e and pipefail. A block that cannot run here
// (it needs a real vendor, production secrets, a container engine, or is
// the test suite itself) carries <!-- not run: reason --> before it.
// Whatever a block leaves running is killed with its process group.
func TestDocsShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documents' shell blocks with the built binary")
	}
	// The blocks use the documents' own addresses: they must be free.
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:9090", "127.0.0.1:9091"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is taken (%v): the documents' blocks serve there", addr, err)
		}
		ln.Close()
	}
	bin := binary(t)
	for _, file := range docFiles(t) {
		blocks := shellBlocks(t, file)
		if len(blocks) == 0 {
			continue
		}
		t.Run(file, func(t *testing.T) {
			dir := freshClone(t, bin)
			env := []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			for _, k := range []string{"GOTOOLCHAIN", "GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY"} {
				if v, ok := os.LookupEnv(k); ok {
					env = append(env, k+"="+v)
				}
			}
			for _, k := range []string{"GOCACHE", "GOMODCACHE"} { // the user's caches, so go run . does not start from nothing
				if _, ok := os.LookupEnv(k); !ok {
					if v, err := exec.Command("go", "env", k).Output(); err == nil {
						env = append(env, k+"="+strings.TrimSpace(string(v)))
					}
				}
			}
			for _, b := range blocks {
				if b.notRun != "" {
					t.Logf("%s:%d not run: %s", b.file, b.line, b.notRun)
					continue
				}
				runDocBlock(t, dir, env, b)
			}
		})
	}
}

// runDocBlock runs one block, failing the test with its output when it
// exits non-zero or outlasts its budget.
func runDocBlock(t *testing.T, dir string, env []string, b docBlock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", b.script)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A file, not a pipe: a background job the block leaves holds its
	// output open, and Wait would wait for it.
	out, err := os.CreateTemp(t.TempDir(), "block-*.out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr, cmd.Stdin = out, out, strings.NewReader("")
	start := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the block left in the background
	}
	t.Logf("%s:%d ran in %s", b.file, b.line, time.Since(start).Round(time.Millisecond))
	if err != nil {
		printed, _ := os.ReadFile(out.Name())
		t.Errorf("%s:%d: the block failed (%v):\n%s\noutput:\n%s", b.file, b.line, err, b.script, printed)
	}
}

// The extraction: sh and bash blocks only, each with its line, and a
// <!-- not run: reason --> marker (blank lines between allowed) exempts the
// block right after it, and only that one.
func TestShellBlocksExtraction(t *testing.T) {
	doc := "# Title\n\n```sh\necho one\n```\n\n<!-- not run: needs a vendor -->\n\n```bash\necho two\n```\n\n```\nplain\n```\n\n```go\nfunc f() {}\n```\n\n```sh\necho three\n```\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "doc.md"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(repoRoot, filepath.Join(dir, "doc.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := shellBlocks(t, rel)
	want := []docBlock{
		{file: rel, line: 3, script: "echo one\n"},
		{file: rel, line: 9, script: "echo two\n", notRun: "needs a vendor"},
		{file: rel, line: 21, script: "echo three\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("blocks = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
