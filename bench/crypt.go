package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// cryptRuns is how many times go test runs each Cipher benchmark.
const cryptRuns = 3

// cryptResult is one benchmark of crypt_test.go over its runs.
type cryptResult struct {
	name   string
	nsOp   []float64
	allocs string // "B/op allocs/op" of the last run
}

// cryptBench runs crypt_test.go's benchmarks (app/crypt's Cipher on a
// license key and on a stored response) with go test -bench.
func (b *bench) cryptBench(ctx context.Context) ([]*cryptResult, error) {
	fmt.Fprintln(b.errOut, "== go test -bench Cipher (app/crypt)")
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "Cipher", "-benchmem", "-count", strconv.Itoa(cryptRuns), ".")
	cmd.Dir = filepath.Join(b.root, "bench")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s%s", err, out.String(), stderr.String())
	}
	var rows []*cryptResult
	byName := map[string]*cryptResult{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		// BenchmarkX-2  745716  1947 ns/op  712 B/op  10 allocs/op
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		fmt.Fprintln(b.out, sc.Text())
		ns, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return rows, fmt.Errorf("parse %q: %w", sc.Text(), err)
		}
		r := byName[f[0]]
		if r == nil {
			r = &cryptResult{name: f[0]}
			byName[f[0]] = r
			rows = append(rows, r)
		}
		r.nsOp = append(r.nsOp, ns)
		r.allocs = strings.Join(f[4:], " ")
	}
	return rows, sc.Err()
}

// printCrypt writes the encryption-at-rest rows.
func printCrypt(w io.Writer, rows []*cryptResult) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Encryption at rest (app/crypt Cipher, go test -bench, %d runs)\n\n", cryptRuns)
	fmt.Fprintln(w, "It cannot be switched off in licensor, so it is measured alone: a create encrypts the license key")
	fmt.Fprintln(w, "and the stored response, a show decrypts the key, a replay decrypts the stored response.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| benchmark | ns/op median [min–max] | memory |")
	fmt.Fprintln(w, "| --- | --- | --- |")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.name, spread(r.nsOp, "%.0f"), r.allocs)
	}
	fmt.Fprintln(w)
}
