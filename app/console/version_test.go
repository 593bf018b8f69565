package console

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/licensor-api/licensor/config"
)

// help, --help and -h print the list of commands on stdout; none of them is
// taken as serve's flags.
func TestHelpFlagsListCommands(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"-help"}, {"help", "--help"}} {
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), args, getenvOf(nil), &stdout, &stderr); err != nil {
			t.Errorf("%q = %v, want the list and no error", args, err)
		}
		for _, want := range []string{"usage: licensor <command> [flags]", "commands:", "  serve ", "  migrate ", "  token ", "  intents ", "  version ", "  help "} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%q: stdout lacks %q:\n%s", args, want, stdout.String())
			}
		}
		if stderr.Len() != 0 {
			t.Errorf("%q: stderr = %q, want nothing (serve's help?)", args, stderr.String())
		}
	}
	// help COMMAND is COMMAND --help, on stdout.
	var helpOut bytes.Buffer
	if err := Run(context.Background(), []string{"help", "token"}, getenvOf(nil), &helpOut, &bytes.Buffer{}); err != nil ||
		!strings.HasPrefix(helpOut.String(), "usage: licensor token ") {
		t.Errorf("help token = %v, stdout %q; want token's usage", err, helpOut.String())
	}
}

// version and --version print the build's version, commit and Go version;
// a build without VCS information (GOFLAGS=-buildvcs=false, as here) says
// "unknown" rather than failing.
func TestVersion(t *testing.T) {
	want := readBuildVersion().String()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"-v"}} {
		var stdout bytes.Buffer
		if err := Run(context.Background(), args, getenvOf(nil), &stdout, &bytes.Buffer{}); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got := stdout.String(); got != want {
			t.Errorf("%q printed %q, want %q", args, got, want)
		}
		lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "version  ") || !strings.HasPrefix(lines[1], "commit   ") || !strings.HasPrefix(lines[2], "go       go1.") {
			t.Errorf("%q printed %q, want version, commit and go lines", args, stdout.String())
		}
	}
}

func TestBuildVersionOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
		ua   string
	}{
		{"no build info", nil, false, "version  unknown\ncommit   unknown\ngo       unknown\n", "licensor/unknown"},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "m", Version: "(devel)"}}, true,
			"version  devel\ncommit   unknown\ngo       go1.26.8\n", "licensor/devel"},
		{"a dirty checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.4-0.20261130100000-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}, true,
			"version  v1.2.4-0.20261130100000-0123456789ab+dirty\ncommit   0123456789abcdef (modified)\ngo       go1.26.8\n",
			"licensor/v1.2.4-0.20261130100000-0123456789ab+dirty"},
		{"a tagged clean build", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba"}, {Key: "vcs.modified", Value: "false"}}}, true,
			"version  v1.3.0\ncommit   fedcba\ngo       go1.26.8\n", "licensor/v1.3.0"},
		{"empty fields", &debug.BuildInfo{}, true, "version  unknown\ncommit   unknown\ngo       unknown\n", "licensor/unknown"},
	} {
		v := buildVersionOf(tc.bi, tc.ok)
		if got := v.String(); got != tc.want {
			t.Errorf("%s: printed %q, want %q", tc.name, got, tc.want)
		}
		if got := v.UserAgent(); got != tc.ua {
			t.Errorf("%s: User-Agent %q, want %q", tc.name, got, tc.ua)
		}
	}
}

// The vendor driver Bootstrap builds sends the version `licensor version`
// prints as its User-Agent.
func TestVendorUserAgentIsTheBuildVersion(t *testing.T) {
	t.Chdir(t.TempDir())
	var mu sync.Mutex
	var agents []string
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer vendor.Close()
	cfg, err := config.Load(getenvOf(map[string]string{"APP_ENV": "testing", "VENDOR_DRIVER": "http", "VENDOR_URL": vendor.URL, "VENDOR_TOKEN": "t"}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Bootstrap(context.Background(), cfg, NewLogger(cfg, &bytes.Buffer{}), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Vendor.FindSite(context.Background(), "acme.test"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "licensor/" + readBuildVersion().Version; len(agents) != 1 || agents[0] != want {
		t.Errorf("User-Agent = %q, want %q", agents, want)
	}
}

// Every command and subcommand prints its --help in one style: the usage
// line, a summary, then its flags; never Go's "Usage of …".
func TestHelpHouseStyle(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		args  []string
		usage string // the usage line's start
		flags bool
	}{
		{[]string{"serve"}, "usage: licensor serve [--vendor-change]\n\n", true},
		{[]string{"version"}, "usage: licensor version\n\n", false},
		{[]string{"reconcile"}, "usage: licensor reconcile [--vendor-change]\n\n", true},
		{[]string{"token"}, "usage: licensor token issue|list|revoke|events [flags]\n\n", false},
		{[]string{"token", "issue"}, "usage: licensor token issue [flags]\n\n", true},
		{[]string{"token", "list"}, "usage: licensor token list [flags]\n\n", true},
		{[]string{"token", "revoke"}, "usage: licensor token revoke ID\n\n", false},
		{[]string{"token", "events"}, "usage: licensor token events [flags]\n\n", true},
		{[]string{"licenses"}, "usage: licensor licenses create|list|rotate-key [flags]\n\n", false},
		{[]string{"licenses", "create"}, "usage: licensor licenses create [flags]\n\n", true},
		{[]string{"licenses", "list"}, "usage: licensor licenses list [flags]\n\n", true},
		{[]string{"intents", "list"}, "usage: licensor intents list [flags]\n\n", true},
		{[]string{"intents", "show"}, "usage: licensor intents show ID [--json]\n\n", true},
		{[]string{"intents", "retry"}, "usage: licensor intents retry ID\n\n", false},
		{[]string{"intents", "discard"}, "usage: licensor intents discard ID --reason TEXT [--json]\n\n", true},
		{[]string{"intents", "events"}, "usage: licensor intents events ID [--json]\n\n", true},
		{[]string{"vendor-sim"}, "usage: licensor vendor-sim [flags]\n\n", true},
	} {
		var stdout bytes.Buffer
		args := append(tc.args, "--help")
		if err := Run(context.Background(), args, getenvOf(nil), &stdout, &bytes.Buffer{}); err != nil {
			t.Errorf("%q = %v, want help and no error", args, err)
		}
		got := stdout.String()
		if !strings.HasPrefix(got, tc.usage) || strings.Contains(got, "Usage of") {
			t.Errorf("%q printed:\n%s\nwant it to start with %q", args, got, tc.usage)
		}
		if summary, _, _ := strings.Cut(strings.TrimPrefix(got, tc.usage), "\n"); summary == "" {
			t.Errorf("%q: no summary after the usage line:\n%s", args, got)
		}
		if has := strings.Contains(got, "\nflags:\n  -"); has != tc.flags {
			t.Errorf("%q: flags listed = %v, want %v:\n%s", args, has, tc.flags, got)
		}
	}
	// vendor-sim's help describes the protocol instead of pointing at a
	// file users do not have.
	var stdout bytes.Buffer
	if err := Run(context.Background(), []string{"vendor-sim", "--help"}, getenvOf(nil), &stdout, &bytes.Buffer{}); err != nil ||
		strings.Contains(stdout.String(), "shared"+"/spec") || !strings.Contains(stdout.String(), "POST /sites") {
		t.Errorf("vendor-sim --help = %v:\n%s\nwant the protocol described, no path outside the repository", err, stdout.String())
	}
}

// A binary built by a Go older than 1.26.10 knows it (serve warns at start,
// since a local toolchain ignores go.mod's toolchain line); a patched,
// newer, development or unknown one does not claim to.
func TestKnownVulnerableGo(t *testing.T) {
	for goVersion, want := range map[string]bool{
		"go1.26.8": true, "go1.25.12": true, "go1.26.9": true,
		"go1.26.10": false, "go1.27.3": false, "go1.27": false, "go2.0.0": false,
		"devel go1.27-abcdef": false, "unknown": false, "": false,
	} {
		if got := (buildVersion{Go: goVersion}).KnownVulnerable(); got != want {
			t.Errorf("KnownVulnerable(%q) = %v, want %v", goVersion, got, want)
		}
	}
}
