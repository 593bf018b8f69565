package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// processOf is the tracked server whose pid is pid, nil for none.
func (b *bench) processOf(pid int) *process {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p := range b.procs {
		if p.cmd.Process != nil && p.pid() == pid {
			return p
		}
	}
	return nil
}

// cpuProfile waits out the warm-up, then asks p for a CPU profile of the
// measured time (its PPROF_ADDR) and writes it to name in -profile's
// directory. Read it with: go tool pprof -top BINARY FILE (the binary is
// kept with -keep).
func (b *bench) cpuProfile(ctx context.Context, p *process, warmup, d time.Duration, name string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(warmup):
	}
	seconds := max(1, int(d.Round(time.Second)/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.pprof, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile of %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile of %s: %s", p.name, resp.Status)
	}
	if err := os.MkdirAll(b.opts.profile, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(b.opts.profile, strings.NewReplacer(" ", "_", "/", "_", ",", "").Replace(name)))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
