package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/licensor-api/licensor/config"
)

// bench holds what one run owns: the temporary directory, the licensor
// binary, the processes it started and the scratch databases it made. Its
// cleanup releases all of them.
type bench struct {
	opts options
	root string // the licensor repository
	tmp  string
	bin  string // the licensor binary: the working tree's, or -baseline's NEW
	// baseBin is licensor built from -baseline's revision; "" without one.
	baseBin string
	self    string // this program, re-executed as the Fiber peer
	appKey  string
	out     io.Writer
	errOut  io.Writer
	dbPid   int // the MariaDB server's process while its cases run, else 0

	mu        sync.Mutex
	procs     map[*process]bool
	scratches []string // MariaDB databases to drop
}

func newBench(ctx context.Context, opts options, stdout, stderr io.Writer) (*bench, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program: %w", err)
	}
	tmp, err := os.MkdirTemp("", "licensor-bench-")
	if err != nil {
		return nil, err
	}
	b := &bench{
		opts: opts, root: root, tmp: tmp, self: self, out: stdout, errOut: stderr,
		bin: filepath.Join(tmp, "licensor"), appKey: config.EncodeKey(config.NewKey()),
		procs: map[*process]bool{},
	}
	if err := b.buildAll(ctx); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	return b, nil
}

// buildAll builds the licensors the run serves: the working tree's (or
// -baseline's NEW) and -baseline's revision.
func (b *bench) buildAll(ctx context.Context) error {
	if b.opts.against != "" {
		if err := b.buildRevision(ctx, b.opts.against, b.bin); err != nil {
			return err
		}
	} else if err := b.build(ctx); err != nil {
		return err
	}
	if b.opts.baseline == "" {
		return nil
	}
	b.baseBin = filepath.Join(b.tmp, "licensor-baseline")
	return b.buildRevision(ctx, b.opts.baseline, b.baseBin)
}

// buildRevision builds licensor as it was at the git revision rev into
// bin: the revision's tree is exported (git archive) into the temporary
// directory and built there with its own go.mod.
func (b *bench) buildRevision(ctx context.Context, rev, bin string) error {
	src, err := os.MkdirTemp(b.tmp, "src-")
	if err != nil {
		return err
	}
	fmt.Fprintf(b.errOut, "building licensor at %s into %s\n", rev, bin)
	archive := exec.CommandContext(ctx, "git", "-C", b.root, "archive", "--format=tar", rev)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var gitErr strings.Builder
	archive.Stderr, untar.Stderr = &gitErr, b.errOut
	if err := untar.Start(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return fmt.Errorf("git archive %s: %w: %s", rev, err, strings.TrimSpace(gitErr.String()))
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("unpack %s: %w", rev, err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = src
	build.Stdout, build.Stderr = b.errOut, b.errOut
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build licensor at %s: %w", rev, err)
	}
	return nil
}

// build builds licensor from the repository into b.bin. The bench's own
// imports of licensor (database, config, crypt) come from the same tree,
// through the replace directive, so the seeder and the peer open the
// database exactly as this licensor does.
func (b *bench) build(ctx context.Context) error {
	fmt.Fprintf(b.errOut, "building licensor from %s into %s\n", b.root, b.bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", b.bin, ".")
	build.Dir = b.root
	build.Stdout, build.Stderr = b.errOut, b.errOut
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build licensor: %w", err)
	}
	return nil
}

// repoRoot finds the licensor module's directory from the working
// directory upwards (the repository root, or bench/ inside it).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/licensor-api/licensor\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from the licensor repository (no go.mod of github.com/licensor-api/licensor above the working directory)")
		}
		dir = parent
	}
}

// track registers a started process so that cleanup stops it.
func (b *bench) track(p *process) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.procs[p] = true
}

// untrack forgets a process that was stopped.
func (b *bench) untrack(p *process) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.procs, p)
}

// cleanup stops every process still running, drops the scratch databases
// and removes the temporary directory (unless -keep).
func (b *bench) cleanup() error {
	b.mu.Lock()
	procs := make([]*process, 0, len(b.procs))
	for p := range b.procs {
		procs = append(procs, p)
	}
	b.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if err := p.stop(); err != nil {
			errs = append(errs, err)
		}
		b.untrack(p)
	}
	for _, name := range b.scratches {
		if err := dropScratch(b.opts.mysqlDSN, name); err != nil {
			errs = append(errs, err)
		}
	}
	if b.opts.keep {
		fmt.Fprintf(b.errOut, "kept %s\n", b.tmp)
	} else if err := os.RemoveAll(b.tmp); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
