package tests

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/tests/testdb"
)

// licenseRow is how the licenses page links a license.
func licenseLink(id string) string {
	return `<a class="mono" href="/console/licenses/` + id + `">` + id + `</a>`
}

// The licenses page finds any consumer's licenses, revoked ones included:
// by a part of the domain, by consumer (a name nobody has finds nothing),
// by status; a status none of the choices is the form's 422. No key is
// shown.
func TestConsoleSearchesLicenses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme, globex := a.consumer("acme"), a.consumer("globex")
		shop, acmeID, globexID := a.create(acme, "shop.acme.test"), a.create(acme, "acme.test"), a.create(globex, "globex.test")
		a.do(http.MethodDelete, "/api/licenses/"+shop, "", acme...).wantStatus(http.StatusNoContent)
		var site string
		a.db.Gorm.Model(&licenses.License{}).Where("id = ?", globexID).Pluck("vendor_site_id", &site)
		b, _ := consoleAs(t, a, "ops", auth.IntentsManage)

		p := b.get("/console/licenses").wantStatus(t, http.StatusOK, "<title>Licenses · licensor console</title>", licenseLink(shop), licenseLink(acmeID), licenseLink(globexID),
			`<td><span class="clip" title="globex.test">globex.test</span></td>`, `<td><span class="clip" title="globex">globex</span></td>`, `<span class="status status-revoked">revoked</span>`, `<td class="mono">`+site+`</td>`)
		if i, j := strings.Index(p.Body, globexID), strings.Index(p.Body, shop); i > j {
			t.Error("the list is not newest first")
		}
		if strings.Contains(p.Body, "LK-") {
			t.Error("the list shows a license key")
		}
		cases := map[string][]string{
			"domain=ACME":                      {shop, acmeID},
			"domain=shop.":                     {shop},
			"consumer=globex":                  {globexID},
			"status=revoked":                   {shop},
			"status=active&domain=acme":        {acmeID},
			"consumer=acme&domain=globex":      nil,
			"consumer=nobody":                  nil,
			"domain=%25":                       nil,
			"domain=acme&status=active&page=2": nil,
		}
		for q, want := range cases {
			p := b.get("/console/licenses?"+q).wantStatus(t, http.StatusOK)
			for _, id := range []string{shop, acmeID, globexID} {
				if listed := strings.Contains(p.Body, id); listed != slices.Contains(want, id) {
					t.Errorf("?%s: %s listed %v, want %v", q, id, listed, !listed)
				}
			}
			if want == nil && !strings.Contains(p.Body, "No license matches this search.") {
				t.Errorf("?%s: no word that nothing matched", q)
			}
		}
		b.get("/console/licenses?status=gone").wantStatus(t, http.StatusUnprocessableEntity, "Choose one of the statuses listed.")
		b.get("/console/licenses?domain="+strings.Repeat("a", 254)).wantStatus(t, http.StatusUnprocessableEntity, "at most 253 characters")
	})
}

// One license's page: its facts with the key masked to its last four
// characters, the intent that created it, its audit trail (event, actor,
// token, request id) and its consumer events (type, sequence); a revoke
// adds to both. An unknown id is a 404 page.
func TestConsoleShowsALicense(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.issued("acme", auth.LicensesRead, auth.LicensesWrite)
		created := a.do(http.MethodPost, "/api/licenses", acmeBody, keyed(append(bearer(acme.Secret), "X-Request-Id", "req-made"), "order-1")...).
			wantStatus(http.StatusCreated).licenseData()
		id, key := created["id"].(string), created["license_key"].(string)
		intent := ptr.Deref(a.record("order-1").PublicID)
		b, _ := consoleAs(t, a, "ops", auth.IntentsManage)

		p := b.get("/console/licenses/"+id).wantStatus(t, http.StatusOK, "<title>License acme.test · licensor console</title>", `<span class="mono">…`+key[len(key)-4:]+`</span>`,
			`<span class="status status-active">active</span>`, "acme", `<a class="mono" href="/console/intents/`+intent+`">`,
			"<td>created</td>", "<td>request</td>", acme.ID, "req-made", "<td>license.created</td>", "<td>1</td>")
		if strings.Contains(p.Body, key) || strings.Contains(p.Body, key[:len(key)-4]) {
			t.Error("the page shows the license key")
		}

		a.do(http.MethodDelete, "/api/licenses/"+id, "", append(bearer(acme.Secret), "X-Request-Id", "req-revoke")...).wantStatus(http.StatusNoContent)
		a.dispatch()
		p = b.get("/console/licenses/"+id).wantStatus(t, http.StatusOK, `<span class="status status-revoked">revoked</span>`,
			"<td>revoked</td>", "req-revoke", "<td>license.revoked</td>", "<td>2</td>")
		if strings.Contains(p.Body, "not yet") {
			t.Error("a dispatched event is shown as not yet in the feed")
		}

		b.get("/console/licenses/01NOSUCHLICENSE00000000000").wantStatus(t, http.StatusNotFound, "Not Found")
	})
}

// The licenses' pages ask intents:manage (the operator's read of any
// consumer's records): a session of a token without it gets 403.
func TestConsoleLicensesAskIntentsManage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		id := a.create(a.consumer("acme"), "acme.test")
		b, _ := consoleAs(t, a, "ops", auth.TokensManage)
		for _, path := range []string{"/console/licenses", "/console/licenses/" + id} {
			p := b.get(path).wantStatus(t, http.StatusForbidden, "Your token does not carry the ability this page needs.")
			if strings.Contains(p.Body, "acme.test") {
				t.Errorf("%s: the 403 page shows the license", path)
			}
		}
		if p := b.get("/console"); strings.Contains(p.Body, `href="/console/licenses"`) {
			t.Error("the navigation offers the licenses to a session that may not read them")
		}
	})
}
