package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// Every change to a consumer's licenses, whoever makes it, is in its feed:
// the consumer's create and revoke, the vendor's suspension, reactivation,
// key rotation and deletion (its webhooks), the reconciler's create after a
// vendor answer was lost, and a drift fix. Each license's events carry
// sequence 1, 2, … and the license as the API shows it after the change.
func TestEveryActorsChangeIsInTheFeed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Now())
		a := newApp(t, db, withClock(clk), withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		created := func(domain string) map[string]any {
			return a.do(http.MethodPost, "/api/licenses", fmt.Sprintf(`{"name":"Shop","domain":%q}`, domain), acme...).
				wantStatus(http.StatusCreated).licenseData()
		}
		at := clk.Now().Add(-time.Hour)
		vendorSays := func(lic map[string]any, typ, key string) {
			t.Helper()
			at = at.Add(time.Second)
			body := vendorEventBodyFor(fmt.Sprintf("evt_%s_%d", typ, at.Unix()), typ, at, lic["vendor_site_id"].(string), lic["domain"].(string), key)
			a.webhook(body, signature(clk.Now(), body, webhookSecret)).wantStatus(http.StatusOK)
		}

		byVendor := created("vendor.test")
		vendorSays(byVendor, licenses.SiteSuspended, "")
		vendorSays(byVendor, licenses.SiteReactivated, "")
		a.vendor.mu.Lock()
		rotated := a.vendor.sites["vendor.test"]
		rotated.LicenseKey = "LK-rotated-by-the-vendor" // as the vendor holds it since
		a.vendor.sites["vendor.test"] = rotated
		a.vendor.mu.Unlock()
		vendorSays(byVendor, licenses.SiteKeyRotated, "LK-rotated-by-the-vendor")
		deleted := created("deleted.test")
		vendorSays(deleted, licenses.SiteDeleted, "")
		revoked := created("revoked.test")
		a.do(http.MethodDelete, "/api/licenses/"+revoked["id"].(string), "", acme...).wantStatus(http.StatusNoContent)

		a.vendor.script("POST", reply{status: 500, body: `{}`}) // nothing made; the reconciler makes it
		a.do(http.MethodPost, "/api/licenses", `{"name":"Shop","domain":"reconciled.test"}`, keyed(acme, "k-reconciled")...).
			wantError(http.StatusAccepted, "operation_pending")
		clk.Advance(settle + time.Second)
		a.reconcileOnce(a.reconciler())

		drifted := created("drifted.test")
		a.vendor.mu.Lock()
		s := a.vendor.sites["drifted.test"]
		s.LicenseKey = "LK-drifted"
		a.vendor.sites["drifted.test"] = s
		a.vendor.mu.Unlock()
		clk.Advance(time.Second) // a check compares the licenses made before it
		if _, err := a.app.Licenses.DriftWith(context.Background(), a.app.Vendor.(licenses.SiteLister), licenses.DriftOptions{Fix: true, Force: true}); err != nil {
			t.Fatal(err)
		}

		a.dispatch()
		var all []feedEvent
		raw := map[string]json.RawMessage{}
		after := ""
		for {
			q := "per_page=3"
			if after != "" {
				q += "&after=" + after
			}
			p := a.feed(acme, q)
			for i, e := range p.events(t) {
				all = append(all, e)
				raw[e.ID] = p.Data[i]
			}
			if !p.Meta.HasMore {
				break
			}
			after = *p.Meta.NextAfter
		}
		types := map[string][]string{}
		last := map[string]feedEvent{}
		for _, e := range all {
			id := e.Data.License.ID
			types[id] = append(types[id], e.Type)
			if e.Sequence != uint64(len(types[id])) {
				t.Errorf("license %s: %s has sequence %d, want %d", id, e.Type, e.Sequence, len(types[id]))
			}
			last[id] = e
		}
		reconciled := a.do(http.MethodPost, "/api/licenses", `{"name":"Shop","domain":"reconciled.test"}`, keyed(acme, "k-reconciled")...).
			wantStatus(http.StatusCreated).licenseData()
		want := map[string][]string{
			byVendor["id"].(string):   {events.LicenseCreated, events.LicenseSuspended, events.LicenseReactivated, events.LicenseKeyRotated},
			deleted["id"].(string):    {events.LicenseCreated, events.LicenseRevoked},
			revoked["id"].(string):    {events.LicenseCreated, events.LicenseRevoked},
			reconciled["id"].(string): {events.LicenseCreated},
			drifted["id"].(string):    {events.LicenseCreated, events.LicenseKeyRotated},
		}
		if fmt.Sprint(types) != fmt.Sprint(want) {
			t.Errorf("the feed's events per license =\n%v\nwant\n%v", types, want)
		}
		// The last event carries the license as GET shows it now.
		for id, e := range last {
			var ev struct {
				Data struct {
					License map[string]any `json:"license"`
				} `json:"data"`
			}
			if err := json.Unmarshal(raw[e.ID], &ev); err != nil {
				t.Fatal(err)
			}
			now := a.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()
			if fmt.Sprint(ev.Data.License) != fmt.Sprint(now) {
				t.Errorf("license %s: its last event carries\n%v\nGET shows\n%v", id, ev.Data.License, now)
			}
		}
	})
}
