package tests

// The checks every console page must pass in the browser, and its
// screenshots.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// a11yReport is what a page says about its basic accessibility.
type a11yReport struct {
	Title      string   `json:"title"`
	Lang       string   `json:"lang"`
	Unlabelled []string `json:"unlabelled"` // inputs, selects and textareas with no label
	Nameless   []string `json:"nameless"`   // buttons and links with no text
	Main       bool     `json:"main"`
}

// a11yScript reads the page's a11yReport.
const a11yScript = `(() => {
  const describe = (el) => el.outerHTML.slice(0, 120);
  const fields = [...document.querySelectorAll('input, select, textarea')]
    .filter((el) => el.type !== 'hidden');
  return {
    title: document.title.trim(),
    lang: document.documentElement.lang,
    unlabelled: fields.filter((el) => !(el.labels && el.labels.length > 0) && !el.getAttribute('aria-label')).map(describe),
    nameless: [...document.querySelectorAll('button, a[href]')]
      .filter((el) => !el.textContent.trim() && !el.getAttribute('aria-label')).map(describe),
    main: document.querySelector('main') !== null,
  };
})()`

// checkPage opens a console path and checks what every page must have: a
// 200, a title, a lang, a label on every field, a name on every button and
// link, a main landmark, and no console error so far; then it screenshots
// the page as name.
func (tb *tab) checkPage(path, name string) {
	tb.t.Helper()
	if status := tb.open(path); status != 200 {
		tb.t.Fatalf("GET %s = %d, want 200", path, status)
	}
	tb.checkShown(name)
}

// checkShown checks the page the tab shows (see checkPage) and
// screenshots it.
func (tb *tab) checkShown(name string) {
	tb.t.Helper()
	r := tabRun(tb, chromedp.Evaluate[a11yReport](a11yScript))
	where := tb.path()
	if r.Title == "" {
		tb.t.Errorf("%s: the page has no title", where)
	}
	if r.Lang == "" {
		tb.t.Errorf("%s: <html> has no lang", where)
	}
	for _, f := range r.Unlabelled {
		tb.t.Errorf("%s: a field has no label: %s", where, f)
	}
	for _, b := range r.Nameless {
		tb.t.Errorf("%s: a button or link has no text: %s", where, b)
	}
	if !r.Main {
		tb.t.Errorf("%s: the page has no <main>", where)
	}
	if errs := tb.consoleErrors(); len(errs) > 0 {
		tb.t.Errorf("%s: the browser's console showed errors:\n  %s", where, strings.Join(errs, "\n  "))
	}
	tb.screenshot(name)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// screenshot writes a full-page PNG of the tab to tests/screenshots/, named
// by the test and name.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	png := tabRun(tb, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	file := unsafeName.ReplaceAllString(strings.TrimPrefix(tb.t.Name(), "TestBrowser")+"-"+name, "_") + ".png"
	if err := os.WriteFile(filepath.Join(screenshotDir, file), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// onPhone runs f with the tab's screen a phone's (390 by 844, mobile).
func (tb *tab) onPhone(f func()) {
	tb.t.Helper()
	tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	f()
	if _, err := chromedp.Call(tb.ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{}); err != nil {
		tb.t.Fatalf("back from the phone's screen: %v", err)
	}
}

// checkPhonePage checks a page as checkPage does, on a phone's screen,
// and that the page is no wider than the screen.
func (tb *tab) checkPhonePage(path, name string) {
	tb.t.Helper()
	tb.checkPage(path, name+"-phone")
	if w := tabRun(tb, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); w[0] > w[1] {
		tb.t.Errorf("%s is %dpx wide on a %dpx phone screen", path, w[0], w[1])
	}
}
