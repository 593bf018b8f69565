package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// appURL is every licensor process's APP_URL: tokens carry it as their
// issuer, so the servers of one database, restarted on other ports, all
// accept the tokens the CLI issued.
const appURL = "http://licensor-bench.test"

// startTimeout bounds a server's start, from exec to a 200 from /healthz.
const startTimeout = 60 * time.Second

// stopTimeout is how long a server has to stop after SIGTERM before SIGKILL.
const stopTimeout = 30 * time.Second

// process is a server the bench started: licensor serve, or the Fiber peer.
type process struct {
	name string
	cmd  *exec.Cmd
	url  string        // http://127.0.0.1:PORT
	log  string        // the file its stderr goes to
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
	// pprof is the base URL of its profiles (PPROF_ADDR), "" when it serves
	// none (the peer; licensor without -profile).
	pprof string
}

// pid is the process id, for /proc.
func (p *process) pid() int { return p.cmd.Process.Pid }

// stop asks the process to stop (SIGTERM), then kills it if it has not
// stopped within stopTimeout. A process that already exited is left alone.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %v after SIGTERM; killed", p.name, stopTimeout)
	}
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// baseEnv is the environment every child starts from: only what a Go
// program needs from the parent, so that no DB_* or APP_* of the caller's
// shell reaches licensor.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// licensorEnv is licensor's environment on a database: production settings
// with the in-memory fake vendor, warnings only, rate limiting off unless
// extra says otherwise (later entries win).
func (b *bench) licensorEnv(db *dbTarget, extra ...string) []string {
	env := append(baseEnv(),
		"APP_ENV=production",
		"APP_KEY="+b.appKey,
		"APP_URL="+appURL,
		"APP_STORAGE="+b.tmp,
		"LOG_LEVEL=warn",
		"VENDOR_DRIVER=fake",
		"VENDOR_ALLOW_FAKE=true",
		"RATE_LIMIT_PER_MINUTE=0",
	)
	env = append(env, db.env...)
	return append(env, extra...)
}

// start execs a server that listens on APP_ADDR (licensor) or -addr (the
// peer), and waits until its /healthz answers 200. A free port is only
// free until somebody takes it (an outgoing connection of the load, of
// the database's or Redis's clients may): a server that could not bind is
// started again on other ports, up to three times.
func (b *bench) start(ctx context.Context, name, path string, args, env []string) (*process, error) {
	for attempt := 1; ; attempt++ {
		p, err := b.startOnce(ctx, name, path, args, env)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return p, err
		}
		fmt.Fprintf(b.errOut, "note: %s could not bind its port, started again\n", name)
	}
}

func (b *bench) startOnce(ctx context.Context, name, path string, args, env []string) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(b.tmp, "log-"+name+".txt")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir = b.tmp // no .env of the caller's directory is read
	cmd.Env = append(env, "APP_ADDR="+addr, "PEER_ADDR="+addr)
	pprof := ""
	if b.opts.profile != "" && path == b.bin {
		paddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cmd.Env, pprof = append(cmd.Env, "PPROF_ADDR="+paddr), "http://"+paddr
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The server dies with the bench, even when the bench is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, url: "http://" + addr, log: logPath, done: make(chan struct{}), pprof: pprof}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	b.track(p)
	if err := waitHealthy(ctx, p); err != nil {
		_ = p.stop()
		b.untrack(p)
		return nil, fmt.Errorf("%s: %w%s", name, err, logTail(logPath))
	}
	return p, nil
}

// stopProcess stops a server and forgets it.
func (b *bench) stopProcess(p *process) error {
	err := p.stop()
	b.untrack(p)
	return err
}

// waitHealthy polls /healthz until it answers 200, the process exits, ctx
// ends or startTimeout passes.
func waitHealthy(ctx context.Context, p *process) error {
	deadline := time.Now().Add(startTimeout)
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/healthz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no 200 from /healthz within %v", startTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("exited before it was healthy: %v", p.err)
		case <-tick.C:
		}
	}
}

// logTail is the end of a log file, for an error message.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return "\n--- " + path + " ---\n" + string(data)
}

// startLicensor starts `licensor serve` on the database.
func (b *bench) startLicensor(ctx context.Context, db *dbTarget, extraEnv ...string) (*process, error) {
	return b.start(ctx, "licensor-"+db.name, db.bin, []string{"serve"}, b.licensorEnv(db, extraEnv...))
}

// licensorCLI runs a licensor command on the database and returns its
// stdout, trimmed.
func (b *bench) licensorCLI(ctx context.Context, db *dbTarget, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, db.bin, args...)
	cmd.Dir = b.tmp
	cmd.Env = b.licensorEnv(db)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("licensor %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// issueToken issues a licenses:read,licenses:write token to the consumer.
func (b *bench) issueToken(ctx context.Context, db *dbTarget, consumer string) (string, error) {
	tok, err := b.licensorCLI(ctx, db, "token", "issue", "--consumer", consumer,
		"--abilities", "licenses:read,licenses:write", "--name", "bench")
	if err == nil && tok == "" {
		err = errors.New("token issue printed nothing")
	}
	return tok, err
}

// rateLimitEnv is the RATE_LIMIT_PER_MINUTE setting for a server.
func rateLimitEnv(perMinute int) string {
	return "RATE_LIMIT_PER_MINUTE=" + strconv.Itoa(perMinute)
}
