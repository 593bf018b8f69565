package tests

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/licensor-api/licensor/app/auth"
)

// An operator finds a license by a part of its domain, opens it, and sees
// its facts, its key masked to its last four characters (the whole key is
// nowhere in the page), its audit trail naming the token that created it,
// and the intent that did, one click away.
func TestBrowserLicenseIsFoundByDomainAndShown(t *testing.T) {
	s := newConsoleSite(t)
	acme, globex := s.consumer("acme"), s.consumer("globex")
	id := s.create(acme, "shop.acme.test")
	s.create(globex, "globex.test")
	key := s.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()["license_key"].(string)

	tb := s.newTab(t)
	tb.signIn(s.token("ops", auth.IntentsManage))
	tb.open("/console/licenses")
	tb.do(chromedp.SetValue(chromedp.ID("domain"), "ACME"))
	if status := tb.submit(`form[action="/console/licenses"] button[type=submit]`); status != http.StatusOK {
		t.Fatalf("the search led to a %d page", status)
	}
	if p := tb.path(); !strings.Contains(p, "domain=ACME") {
		t.Errorf("the search is at %s, want its filter in the URL", p)
	}
	rows := tb.text("table tbody")
	if !strings.Contains(rows, "shop.acme.test") || strings.Contains(rows, "globex") {
		t.Fatalf("searching ACME lists %q, want acme's license alone", rows)
	}
	tb.checkShown("search")

	tb.do(chromedp.Click(chromedp.CSS(`a[href="/console/licenses/`+id+`"]`)), chromedp.WaitVisible(chromedp.CSS(`dl.facts`)))
	facts := tb.text(`dl.facts`)
	if !strings.Contains(facts, "…"+key[len(key)-4:]) || !strings.Contains(facts, "acme") {
		t.Errorf("the license's facts say %q, want its consumer and its key's last four characters", facts)
	}
	if strings.Contains(tb.html(), key) {
		t.Error("the license's page holds its whole key")
	}
	if trail := tb.text(`table`); !strings.Contains(trail, "created") {
		t.Errorf("the audit trail says %q, want the create", trail)
	}
	tb.checkShown("license")
	tb.do(chromedp.Click(chromedp.CSS(`dl.facts a[href^="/console/intents/"]`)), chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)))
	if got := tb.text(`dl.facts dd .status`); got != "completed" {
		t.Errorf("the license's intent shows %q, want completed", got)
	}
}
