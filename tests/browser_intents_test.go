package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
)

// An operator watches an intent through its life in the console: the
// vendor commits a create and its answer is lost (202), and the intents
// list shows it pending; the vendor stays down through the reconciler's
// one attempt, and the intent's page shows it failed with a Retry button;
// the operator retries it (confirming), the vendor is back, and the page,
// reloaded while serve's reconciler loop runs, shows it completed with
// its license.
func TestBrowserPendingIntentIsRetriedAndCompletes(t *testing.T) {
	clk := testkit.NewClock(time.Now())
	s := newConsoleSite(t, withClock(clk), withConfig(func(c *config.Config) {
		c.Reconcile.MaxAttempts = 1                  // the first failed attempt fails the intent
		c.Reconcile.Interval = 20 * time.Millisecond // the background loop's pace, once it runs
	}))
	tb := s.newTab(t)
	tb.signIn(s.token("ops", auth.All))

	s.vendor.script("POST", reply{status: 502, body: `upstream reset`, commit: true})
	id := s.do(http.MethodPost, "/api/licenses", acmeBody, keyed(s.consumer("acme"), "order-b1")...).pendingOperation()

	tb.checkPage("/console/intents?status=pending", "pending")
	row := `tr:has(a[href="/console/intents/` + id + `"])`
	if got := tb.text(row + " .status"); got != idempotency.StatusPending {
		t.Errorf("the list shows the intent %q, want pending", got)
	}
	if got := tb.text(row + " td:nth-child(3)"); got != "acme" {
		t.Errorf("the list names the consumer %q, want acme", got)
	}

	s.vendor.script("GET", reply{status: 503, body: `{}`})
	if got := results(s.reconcileOnce(s.reconciler())); got != "failed" {
		t.Fatalf("reconcile results = %q, want failed", got)
	}
	tb.do(chromedp.Click(chromedp.CSS(`a[href="/console/intents/`+id+`"]`)), chromedp.WaitVisible(chromedp.CSS(`dl.facts`)))
	if p := tb.path(); p != "/console/intents/"+id {
		t.Fatalf("the intent's link led to %s", p)
	}
	tb.wantIntentStatus(idempotency.StatusFailed)
	tb.checkShown("failed")

	if status := tb.submit(`form[action$="/retry"] button[type=submit]`); status != http.StatusOK {
		t.Fatalf("the retry led to a %d page", status)
	}
	if d := tb.lastDialog(); !strings.HasPrefix(d, "Retry this intent?") {
		t.Errorf("the retry asked %q, want its confirmation", d)
	}
	if flash := tb.text(".flash"); !strings.HasPrefix(flash, "Intent retried") {
		t.Errorf("the flash says %q, want the retry's", flash)
	}
	tb.wantIntentStatus(idempotency.StatusPending)
	tb.checkShown("retried")

	s.reconcileInBackground(t) // the vendor answers again: serve's loop settles it
	tb.reloadUntil(10*time.Second, func() bool {
		return tb.text(`dl.facts dd .status`) == idempotency.StatusCompleted
	}, "the intent completed")
	if got := tb.text(`h2 + dl.facts`); !strings.Contains(got, "acme.test") {
		t.Errorf("the completed intent's license section says %q, want its domain", got)
	}
	if history := tb.text(`ol.timeline`); !strings.Contains(history, "Retried") || !strings.Contains(history, "by ops") {
		t.Errorf("the history does not show the retry by the signed-in token's consumer: %q", history)
	}
	tb.checkShown("completed")
	s.wantVendorCalls("POST", 1) // the lost answer's site was found, never created again
}

// wantIntentStatus fails the test unless the intent's page shows status.
func (tb *tab) wantIntentStatus(status string) {
	tb.t.Helper()
	if got := tb.text(`dl.facts dd .status`); got != status {
		tb.t.Fatalf("the intent's page shows it %q, want %s", got, status)
	}
}
