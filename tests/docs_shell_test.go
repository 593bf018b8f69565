package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
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
// docs/*.md as a user pastes it after the README's steps: one document at a
// time in a fresh copy of the repository with the binary built at
// ./licensor, and nothing added to PATH (a directory on it holding a
// licensor is taken off, so a bare `licensor` fails here as it does on a
// new machine), each block in its own bash with -e and pipefail. A block
// that cannot run here (it needs a real vendor, production secrets, a
// container engine, or is the test suite itself) carries
// <!-- not run: reason --> before it. A block fails when it exits non-zero,
// outlasts its budget, leaves a process of its own running once it has
// ended, or has a loop that could spin forever (every block, run or not).
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
			for _, b := range blocks {
				for _, loop := range unboundedLoops(b.script) {
					t.Errorf("%s:%d: %s", b.file, b.line, loop)
				}
			}
			dir := freshClone(t, bin)
			env := []string{"PATH=" + pathWithoutLicensor(os.Getenv("PATH")), "HOME=" + t.TempDir()}
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
				start := time.Now()
				printed, err := runDocBlock(dir, env, b.script, 90*time.Second)
				t.Logf("%s:%d ran in %s", b.file, b.line, time.Since(start).Round(time.Millisecond))
				if err != nil {
					t.Errorf("%s:%d: %v:\n%s\noutput:\n%s", b.file, b.line, err, b.script, printed)
				}
			}
		})
	}
}

// pathWithoutLicensor is PATH without the directories that hold a
// licensor executable: the blocks must call ./licensor, or set PATH
// themselves, as on a machine where only the README's build ran.
func pathWithoutLicensor(path string) string {
	var kept []string
	for _, d := range filepath.SplitList(path) {
		if info, err := os.Stat(filepath.Join(d, "licensor")); err == nil && !info.IsDir() {
			continue
		}
		kept = append(kept, d)
	}
	return strings.Join(kept, string(os.PathListSeparator))
}

var (
	// shellComment is a comment to the end of the line (a # at the start
	// of a line or after a blank).
	shellComment = regexp.MustCompile(`(?m)(^|\s)#.*$`)
	// loopWord is a while, until or C-style for loop in command position.
	loopWord = regexp.MustCompile(`(?m)(^|[;&|({]|\bdo|\bthen|\belse)\s*(while\b|until\b|for\s*\(\()`)
	// forLoop is a for loop, its word list and its body up to done.
	forLoop = regexp.MustCompile(`(?s)\bfor\s+\w+\s+in\s+([^;\n]*?)\s*[;\n]\s*do\b(.*?)\bdone\b`)
	// boundedWords is a for loop's list a user can count: literal words,
	// or $(seq N).
	boundedWords = regexp.MustCompile(`^(\$\(seq( \d+){1,3}\)|[\w.-]+( [\w.-]+)*)$`)
	// curlTimeout is curl's bound on a whole transfer.
	curlTimeout = regexp.MustCompile(`(^|\s)(-m\s*\d|--max-time[ =]\d|-[a-zA-Z]*m\s+\d)`)
	curlCall    = regexp.MustCompile(`\bcurl\b[^|;&\n]*(\\\n[^|;&\n]*)*`)
)

// unboundedLoops names each loop of a script that could spin forever: a
// while, until or for (( )) loop (wait with for i in $(seq N) instead),
// a for loop over anything but literal words or $(seq N), and a wait loop
// (one that sleeps) with a curl that has no --max-time: a server that
// accepts and never answers would hold it.
func unboundedLoops(script string) []string {
	code := shellComment.ReplaceAllString(script, "$1")
	var found []string
	for _, m := range loopWord.FindAllStringSubmatch(code, -1) {
		found = append(found, fmt.Sprintf("a %q loop has no bound: wait with `for i in $(seq N); do …; done` instead", strings.TrimSpace(m[2])))
	}
	for _, m := range forLoop.FindAllStringSubmatch(code, -1) {
		if !boundedWords.MatchString(strings.TrimSpace(m[1])) {
			found = append(found, fmt.Sprintf("a for loop over %q: loop over literal words or $(seq N)", m[1]))
		}
		if !regexp.MustCompile(`\bsleep\b`).MatchString(m[2]) {
			continue
		}
		for _, c := range curlCall.FindAllString(m[2], -1) {
			if !curlTimeout.MatchString(c) {
				found = append(found, fmt.Sprintf("a wait loop's curl has no -m/--max-time: %q", strings.TrimSpace(c)))
			}
		}
	}
	return found
}

// runDocBlock runs one block in bash, in a process group of its own, and
// says what went wrong: it exited non-zero, outlasted budget, or left a
// process of its group running once it ended (what it started and did not
// stop, or stopped without waiting for). What it left is then killed.
func runDocBlock(dir string, env []string, script string, budget time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A file, not a pipe: a background job the block leaves holds its
	// output open, and Wait would wait for it.
	out, err := os.CreateTemp("", "licensor-block-*.out")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr, cmd.Stdin = out, out, strings.NewReader("")
	runErr := cmd.Run()
	var left []string
	if cmd.Process != nil {
		// A process the block killed may take a moment to go (on a busy
		// machine, longer than the shell takes to exit): what is still there
		// after two seconds was left running.
		testkit.Poll(2*time.Second, func() bool {
			left = processGroup(cmd.Process.Pid)
			return len(left) == 0
		})
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the block left in the background
	}
	printed, _ := os.ReadFile(out.Name())
	switch {
	case ctx.Err() != nil:
		return string(printed), fmt.Errorf("the block outlasted its %s (a wait that never ends?)", budget)
	case runErr != nil:
		return string(printed), fmt.Errorf("the block failed (%v)", runErr)
	case len(left) > 0:
		return string(printed), fmt.Errorf("the block ended leaving %d process(es) running (stop what it starts: kill $PID; wait $PID): %s",
			len(left), strings.Join(left, "; "))
	}
	return string(printed), nil
}

// processGroup lists the live processes (zombies aside) of process group
// pgid, each as "pid command line", read from /proc.
func processGroup(pgid int) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …: comm may hold blanks, so split after its ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		found = append(found, fmt.Sprintf("%d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))))
	}
	return found
}

// A block that leaves a process running, or stops it without waiting for
// it, fails; one that stops and waits for what it started passes; one that
// outlasts its budget fails.
func TestDocBlockLeftovers(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH")}
	dir := t.TempDir()
	for _, c := range []struct {
		script, want string
	}{
		{"sleep 60 &\necho started\n", "leaving 1 process(es) running"},
		{"sleep 60 & A=$!\nsleep 60 & B=$!\nsleep 60 & C=$!\nkill %1 %2\n", "leaving 1 process(es) running"},
		{"sleep 60 & A=$!\nkill $A; wait $A || true\n", ""},
		{"false\n", "the block failed"},
		{"echo >/dev/null; sleep 60\n", "outlasted"},
	} {
		_, err := runDocBlock(dir, env, c.script, 3*time.Second)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want it to pass", c.script, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error saying %q", c.script, err, c.want)
		}
	}
}

// The loops a wait may use: bounded ones pass, anything that could spin
// forever is named.
func TestUnboundedLoops(t *testing.T) {
	for script, want := range map[string]int{
		"until curl -sf localhost:8080/healthz; do sleep 0.2; done\n":                                    1,
		"while true; do sleep 1; done\n":                                                                 1,
		"x=1 # until it is done\necho while\n":                                                           0,
		"for i in $(seq 50); do curl -sf -m 1 localhost:8080/healthz && break; sleep 0.2; done\n":        0,
		"for i in $(seq 50); do curl -sf localhost:8080/healthz && break; sleep 0.2; done\n":             1,
		"for i in 1 2; do\n  curl -s -i localhost:8080/api \\\n    | grep HTTP\ndone\n":                  0,
		"for f in $(ls); do sleep 1; done\n":                                                             1,
		"for ((;;)); do sleep 1; done\n":                                                                 1,
		"for attempt in 1 2 3; do\n  status=$(curl -sS --max-time 30 -o x localhost)\n  sleep 1\ndone\n": 0,
	} {
		if got := unboundedLoops(script); len(got) != want {
			t.Errorf("unboundedLoops(%q) = %q, want %d finding(s)", script, got, want)
		}
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
