package tests

// The console's browser tests drive headless Chromium (Debian's `chromium`,
// which .ci/run installs) through github.com/chromedp/chromedp. One browser
// process serves the whole run (started on first use, killed by TestMain);
// each test gets a browser context of its own (its own cookies, like a
// private window) with a tab and a deadline, on a server of its own.
//
// They run on SQLite alone: what they test is the pages in a browser (the
// session cookie, CSRF, CSP, the forms and what the pages show), not the
// database under them, which the console's Go HTTP tests cover on both.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// browserTimeout bounds one browser test, every step of it.
const browserTimeout = 60 * time.Second

// screenshotDir is where the browser tests write their screenshots (kept
// out of git by .gitignore).
const screenshotDir = "screenshots"

// chrome is the run's one browser process.
var chrome struct {
	once   sync.Once
	ctx    context.Context // the browser's chromedp context: each test's tab is a child
	cancel func()          // ends the browser and its allocator
	dir    string          // its fresh profile, removed with it
	err    error
}

// chromiumPath is the Chromium binary: CHROME_PATH, or chromium or
// chromium-browser on PATH; "" when there is none.
func chromiumPath() string {
	if p := os.Getenv("CHROME_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chromeFor is the run's browser, started on first use. Without Chromium a
// test is skipped, or failed under CI=true, where .ci/run installs it.
func chromeFor(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a real browser")
	}
	path := chromiumPath()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("Chromium is not installed (no CHROME_PATH, chromium or chromium-browser): .ci/run installs Debian's chromium")
		}
		t.Skip("Chromium is not installed (apt-get install chromium, or set CHROME_PATH): skipping the browser test")
	}
	chrome.once.Do(func() { chrome.err = startChrome(path) })
	if chrome.err != nil {
		t.Fatalf("start Chromium (%s): %v", path, chrome.err)
	}
	return chrome.ctx
}

// startChrome starts the browser with the flags this machine needs: no
// sandbox and no GPU (a container), and nothing that phones out (no QUIC,
// no background networking, no component updates or sync), whose
// connections to a closed network pile up.
func startChrome(path string) error {
	dir, err := os.MkdirTemp("", "licensor-chromium-")
	if err != nil {
		return err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// The first Do starts the browser and binds its life to ctx: it takes
	// no deadline of its own.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		allocCancel()
		_ = os.RemoveAll(dir)
		return err
	}
	chrome.ctx, chrome.dir = ctx, dir
	chrome.cancel = func() {
		stop, stopCancel := context.WithTimeout(ctx, 10*time.Second)
		defer stopCancel()
		_ = chromedp.Cancel(stop) // closes the browser, and waits for its process
		cancel()
		allocCancel()
	}
	return nil
}

// stopBrowser ends the run's browser, if a test started one (TestMain).
func stopBrowser() {
	if chrome.cancel != nil {
		chrome.cancel()
		_ = os.RemoveAll(chrome.dir)
	}
}

// consoleSite is a console served over real HTTP, as serve serves it: the app's
// bootstrapped handler on a loopback port.
type consoleSite struct {
	*app
	url string
}

// newConsoleSite builds an app (the console is on unless CONSOLE_DISABLED)
// on a SQLite database of its own, and serves it on 127.0.0.1.
func newConsoleSite(t *testing.T, opts ...option) *consoleSite {
	t.Helper()
	chromeFor(t) // skips (or fails) before anything is built when there is no browser
	a := newApp(t, testdb.New(t, "sqlite"), opts...)
	srv := httptest.NewServer(a.e)
	t.Cleanup(srv.Close)
	return &consoleSite{app: a, url: srv.URL}
}

// tab is a browser tab in a browser context of its own (its own cookies),
// whose console errors fail the test.
type tab struct {
	t    *testing.T
	ctx  context.Context
	site *consoleSite
	mu   sync.Mutex
	errs []string // the console errors seen
	// expected are console errors the test provokes on purpose (the
	// "Failed to load resource" entry of a 419 page), matched by substring.
	expected []string
	dialogs  []string // the messages of the dialogs (a form's confirm) accepted
}

// newTab opens a tab on s in a fresh browser context; the tab and its
// context end with the test, after the test checked that no console error
// was seen.
func (s *consoleSite) newTab(t *testing.T) *tab {
	t.Helper()
	parent := chromeFor(t)
	tb := &tab{t: t, site: s}
	deadline, cancelDeadline := context.WithTimeout(parent, browserTimeout)
	ctx, cancel := chromedp.NewContext(deadline, chromedp.WithNewBrowserContext(), chromedp.WithListener(tb.listen))
	t.Cleanup(func() {
		cancel()
		cancelDeadline()
	})
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		t.Fatalf("open a tab: %v", err)
	}
	tb.ctx = ctx
	tb.acceptDialogs()
	t.Cleanup(tb.checkNoConsoleErrors)
	return tb
}

// acceptDialogs answers OK to every dialog the tab opens (a form's
// data-confirm), as an operator who means it would, and records its
// message; it stops with the tab.
func (tb *tab) acceptDialogs() {
	opened := chromedp.Events(tb.ctx, cdppage.JavascriptDialogOpening)
	go func() {
		for ev, err := range opened {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, ev.Message)
			tb.mu.Unlock()
			_, _ = chromedp.Call(tb.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
}

// lastDialog is the message of the last dialog the tab accepted.
func (tb *tab) lastDialog() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) == 0 {
		return ""
	}
	return tb.dialogs[len(tb.dialogs)-1]
}

// listen records the console errors: a console.error call, an exception
// nothing caught, and an error of the browser's log (a CSP violation, a
// resource that failed to load). It runs in the tab's event loop: it only
// records.
func (tb *tab) listen(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
		}
		msg = "console.error: " + strings.Join(parts, " ")
	case *runtime.EventExceptionThrown:
		msg = "exception: " + ev.ExceptionDetails.Text
		if ex := ev.ExceptionDetails.Exception; ex != nil {
			msg += " " + ex.Description
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level != log.EntryLevelError {
			return
		}
		msg = fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
	default:
		return
	}
	tb.mu.Lock()
	tb.errs = append(tb.errs, msg)
	tb.mu.Unlock()
}

// expectConsoleError lets through console errors containing substr: the
// ones a test provokes on purpose.
func (tb *tab) expectConsoleError(substr string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.expected = append(tb.expected, substr)
}

// consoleErrors are the console errors seen so far that no test expected.
func (tb *tab) consoleErrors() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, e := range tb.errs {
		if !slices.ContainsFunc(tb.expected, func(s string) bool { return strings.Contains(e, s) }) {
			out = append(out, e)
		}
	}
	return out
}

func (tb *tab) checkNoConsoleErrors() {
	if errs := tb.consoleErrors(); len(errs) > 0 {
		tb.t.Errorf("the browser's console showed %d errors:\n  %s", len(errs), strings.Join(errs, "\n  "))
	}
}

// do runs browser steps, failing the test on an error.
func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
}

// tabRun runs one browser step that returns a value.
func tabRun[T any](tb *tab, a chromedp.Action[T]) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, a)
	if err != nil {
		tb.t.Fatalf("browser: %v", err)
	}
	return v
}

// open loads a console path and returns the status of its page (after the
// redirects).
func (tb *tab) open(path string) int64 {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, chromedp.Navigate(tb.site.url+path))
	if err != nil {
		tb.t.Fatalf("open %s: %v", path, err)
	}
	return resp.Status
}

// submit clicks a form's button and waits for the page it leads to; it
// returns that page's status.
func (tb *tab) submit(button string) int64 {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, chromedp.Click(chromedp.CSS(button)))
	if err != nil {
		tb.t.Fatalf("submit %s: %v", button, err)
	}
	return resp.Status
}

// path is the tab's location, without the site's origin.
func (tb *tab) path() string {
	tb.t.Helper()
	return strings.TrimPrefix(tabRun(tb, chromedp.Location()), tb.site.url)
}

// text is the visible text of the first element sel matches.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return tabRun(tb, chromedp.Text(chromedp.CSS(sel)))
}

// html is the whole page's HTML, as the browser holds it.
func (tb *tab) html() string {
	tb.t.Helper()
	return tabRun(tb, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
}

// signIn pastes token into the sign-in form and sends it; it returns the
// status of the page the browser lands on.
func (tb *tab) signIn(token string) int64 {
	tb.t.Helper()
	if status := tb.open("/console/login"); status != 200 {
		tb.t.Fatalf("GET /console/login = %d", status)
	}
	tb.do(chromedp.SetValue(chromedp.ID("token"), token))
	return tb.submit(`form[action="/console/login"] button[type=submit]`)
}

// wantSignInPage fails the test unless the tab shows the sign-in form.
func (tb *tab) wantSignInPage() {
	tb.t.Helper()
	if p := tb.path(); !strings.HasPrefix(p, "/console/login") {
		tb.t.Fatalf("the browser is at %s, want the sign-in page", p)
	}
	if h := tb.text("h1"); h != "Sign in to the console" {
		tb.t.Fatalf("the page's heading is %q, want the sign-in form's", h)
	}
}

// reconcileInBackground runs the app's reconciler loop, as serve runs it,
// until the test ends.
func (s *consoleSite) reconcileInBackground(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.app.app.Reconciler.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// reloadUntil reloads the tab until cond holds on the page it shows, or
// fails the test at the deadline.
func (tb *tab) reloadUntil(within time.Duration, cond func() bool, what string) {
	tb.t.Helper()
	testkit.Eventually(tb.t, within, func() bool {
		tb.do(chromedp.Reload())
		return cond()
	}, "the page never showed %s", what)
}
