package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary the end-to-end tests built, ends the browser
// the browser tests started, and fails the run when a response a test
// received over HTTP broke the contract.
func TestMain(m *testing.M) {
	code := m.Run()
	stopBrowser()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	if b := contractBreaches(); len(b) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d responses broke docs/openapi.yaml:\n  %s\n", len(b), strings.Join(b, "\n  "))
		code = 1
	}
	os.Exit(code)
}

// binary builds the licensor binary once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "licensor-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "licensor")
		out, err := exec.Command("go", "build", "-o", binPath, "..").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("build licensor: %v", buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// process is a licensor process the test started; it is stopped with SIGTERM.
type process struct {
	cmd    *exec.Cmd
	output *testkit.Buffer
}

func start(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(binary(t), args...), output: &testkit.Buffer{}}
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", args[0], p.output.String())
		}
	})
	return p
}

// runCmd runs a licensor command to its end and returns its stdout.
func runCmd(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("licensor %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// waitFor polls a licensor url until it answers with want, or fails at the deadline.
func waitFor(t *testing.T, url, token string, want int) {
	t.Helper()
	pollFor(t, contractClient, url, token, want)
}

func pollFor(t *testing.T, client *http.Client, url, token string, want int) {
	t.Helper()
	answers := func() bool {
		code, _, _ := sendWith(client, url, http.MethodGet, token, "", "")
		return code == want
	}
	if !testkit.Poll(20*time.Second, answers) {
		t.Fatalf("%s did not answer %d in time", url, want)
	}
}

// send makes one request to a licensor process, through contractClient.
func send(url, method, token, key, body string) (int, http.Header, string) {
	return sendWith(contractClient, url, method, token, key, body)
}

// sendVendor makes one request to the vendor simulator, which the contract
// does not describe.
func sendVendor(url, method, token string) (int, http.Header, string) {
	return sendWith(http.DefaultClient, url, method, token, "", "")
}

func sendWith(client *http.Client, url, method, token, key, body string) (int, http.Header, string) {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, ""
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestEndToEndLostAnswerIsReconciled runs real processes: vendor-sim commits
// the first create and drops the connection; serve answers 202; a separate
// `licensor reconcile` settles the intent; the client's retry replays 201.
func TestEndToEndLostAnswerIsReconciled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		r := newFaultRig(t, db, []string{"--drop-creates", "1", "--drop-mode", "close"},
			"VENDOR_TIMEOUT=2s", "RECONCILE_INTERVAL=1h") // only the reconcile command settles it here
		env, token := r.env, r.token
		urls, serves := startServes(t, env, 1)
		serve := serves[0]

		url := urls[0] + "/api/licenses"
		for range 2 {
			if code, _, body := send(url, http.MethodPost, token, "order-e2e", acmeBody); code != http.StatusAccepted {
				t.Fatalf("POST = %d %s, want 202 operation_pending", code, body)
			}
		}
		out := runCmd(t, env, "reconcile")
		if !strings.Contains(out, "completed") {
			t.Fatalf("reconcile printed %q, want a completed intent", out)
		}
		code, h, body := send(url, http.MethodPost, token, "order-e2e", acmeBody)
		if code != http.StatusCreated || h.Get("Idempotent-Replayed") != "true" || !strings.Contains(body, `"domain":"acme.test"`) {
			t.Fatalf("retry = %d replayed=%q %s, want the stored 201", code, h.Get("Idempotent-Replayed"), body)
		}
		if sites := r.sim.sites("acme.test"); len(sites) != 1 {
			t.Errorf("the vendor holds %d sites for the domain: %v", len(sites), sites)
		}
		if strings.Contains(serve.output.String(), token) || strings.Contains(serve.output.String(), "order-e2e") ||
			strings.Contains(serve.output.String(), faultSimToken) {
			t.Error("serve logged a token or a raw idempotency key")
		}
	})
}

// main maps a usage mistake to exit 2 and a failure to exit 1, each with a
// message on stderr (operations.md).
func TestExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "APP_STORAGE=" + t.TempDir()}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"unknown command", nil, []string{"frobnicate"}, 2},
		{"unknown flag", nil, []string{"serve", "--frobnicate"}, 2},
		{"missing argument", nil, []string{"token", "revoke"}, 2},
		{"failure", []string{"APP_ENV=production", "VENDOR_ALLOW_FAKE=true"}, []string{"migrate", "status"}, 1}, // no APP_KEY
		{"production with the fake vendor", []string{"APP_ENV=production", "APP_KEY=base64:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}, []string{"serve"}, 1},
		{"version", nil, []string{"--version"}, 0},
		{"--help", nil, []string{"--help"}, 0},
		{"help", nil, []string{"help"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), tc.args...)
			var stderr bytes.Buffer
			cmd.Env, cmd.Stderr, cmd.Dir = append(env, tc.env...), &stderr, t.TempDir()
			err := cmd.Run()
			got := 0
			if exit, ok := err.(*exec.ExitError); ok {
				got = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("exit %d, want %d; stderr: %s", got, tc.want, stderr.String())
			}
			if tc.want != 0 && !strings.Contains(stderr.String(), "licensor: ") {
				t.Errorf("no message on stderr: %q", stderr.String())
			}
		})
	}
}
