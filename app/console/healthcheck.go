package console

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/licensor-api/licensor/config"
)

// healthcheck is the container image's HEALTHCHECK (a distroless image has no
// shell and no curl): exit 0 when URL (default /readyz on APP_ADDR) answers 2xx.
func healthcheck(ctx context.Context, e env) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 4*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: licensor healthcheck [--timeout 4s] [URL]

GETs URL and exits 0 when it answers 2xx, 1 otherwise. Without URL: /readyz
on APP_ADDR (0.0.0.0 and :: are asked on 127.0.0.1). A URL without a path
gets /readyz; give /healthz for liveness.

flags:`)
		fs.PrintDefaults()
	}
	if ok, err := parseFlags(fs, e); !ok {
		return err
	}
	if *timeout <= 0 {
		return usagef("healthcheck: --timeout must be positive")
	}
	var target string
	switch fs.NArg() {
	case 0:
		addr, err := config.ListenAddr(e.getenv)
		if err != nil {
			return err
		}
		if target, err = readyzURL(addr); err != nil {
			return fmt.Errorf("healthcheck: APP_ADDR %q: %w", addr, err)
		}
	case 1:
		var err error
		if target, err = healthURL(fs.Arg(0)); err != nil {
			return usagef("healthcheck: %v", err)
		}
	default:
		return usagef("healthcheck: too many arguments (one URL at most)")
	}
	status, err := probe(ctx, target, *timeout)
	if err != nil {
		return fmt.Errorf("healthcheck: %s: %w", target, err)
	}
	if status/100 != 2 {
		return fmt.Errorf("healthcheck: %s answered %d %s", target, status, http.StatusText(status))
	}
	fmt.Fprintf(e.stdout, "%s: %d %s\n", target, status, http.StatusText(status))
	return nil
}

// probe GETs target once, directly (no proxy from the environment, no
// redirects followed), and returns the answer's status.
func probe(ctx context.Context, target string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	c := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// readyzURL is /readyz on a listen address; an unspecified host (all
// interfaces) is asked on the loopback.
func readyzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/readyz"}).String(), nil
}

// healthURL checks a URL given on the command line; one without a path gets
// /readyz.
func healthURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL such as http://127.0.0.1:8080/readyz", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/readyz"
	}
	return u.String(), nil
}
