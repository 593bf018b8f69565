package tests

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/webhooks"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// withPrivateWebhooks lets endpoints be any address (WEBHOOK_ALLOW_PRIVATE,
// the default outside production): no name in these tests is resolved.
func withPrivateWebhooks() option {
	return withConfig(func(c *config.Config) { c.Webhooks.AllowPrivate = true })
}

// hooks is a consumer's token that manages its endpoints and its licenses.
func (a *app) hooks(consumer string) []string {
	a.t.Helper()
	return bearer(a.token(consumer, auth.WebhooksManage, auth.LicensesRead, auth.LicensesWrite))
}

// endpoint registers an endpoint and returns the answer's data.
func (a *app) endpoint(token []string, body string) map[string]any {
	a.t.Helper()
	return a.do(http.MethodPost, "/api/webhook-endpoints", body, token...).wantStatus(http.StatusCreated).licenseData()
}

func (a *app) endpointRows() int64 {
	a.t.Helper()
	var n int64
	if err := a.db.Gorm.Model(&webhooks.Endpoint{}).Count(&n).Error; err != nil {
		a.t.Fatal(err)
	}
	return n
}

func TestWebhookEndpointsCRUD(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		acme := a.hooks("acme")
		r := a.do(http.MethodPost, "/api/webhook-endpoints", `{"url":" https://shop.example/hooks ","description":"Shop"}`, acme...).wantStatus(http.StatusCreated)
		d := r.licenseData()
		id, _ := d["id"].(string)
		if got := r.Header().Get("Location"); got != "/api/webhook-endpoints/"+id {
			t.Errorf("Location = %q, want /api/webhook-endpoints/%s", got, id)
		}
		secret, _ := d["secret"].(string)
		if !strings.HasPrefix(secret, "whsec_") || len(secret) != len("whsec_")+64 {
			t.Errorf("secret = %q, want whsec_ and 64 hex digits", secret)
		}
		if d["url"] != "https://shop.example/hooks" || d["description"] != "Shop" || d["enabled"] != true ||
			fmt.Sprint(d["events"]) != "[license.*]" || d["disabled_at"] != nil {
			t.Errorf("created = %v", d)
		}

		// The secret is shown once: never again, and not kept as it is.
		shown := a.do(http.MethodGet, "/api/webhook-endpoints/"+id, "", acme...).wantStatus(http.StatusOK)
		listed := a.do(http.MethodGet, "/api/webhook-endpoints", "", acme...).wantStatus(http.StatusOK)
		for _, body := range []string{shown.Body.String(), listed.Body.String()} {
			if strings.Contains(body, "secret") || strings.Contains(body, secret) {
				t.Errorf("a later answer shows the secret: %s", body)
			}
		}
		if got := listed.json()["data"].([]any); len(got) != 1 || got[0].(map[string]any)["id"] != id {
			t.Errorf("listed = %v, want the one endpoint", got)
		}
		var stored string
		if err := a.db.Gorm.Raw("SELECT secret FROM webhook_endpoints WHERE id = ?", id).Scan(&stored).Error; err != nil {
			t.Fatal(err)
		}
		if stored == "" || strings.Contains(stored, secret) || strings.Contains(stored, strings.TrimPrefix(secret, "whsec_")) {
			t.Errorf("the stored secret is %q: want it sealed", stored)
		}
		if strings.Contains(a.logs.String(), secret) {
			t.Error("the secret reached the log")
		}

		// PATCH changes what it is sent; other fields are ignored.
		p := a.do(http.MethodPatch, "/api/webhook-endpoints/"+id, `{"url":"https://shop.example/v2","events":["license.revoked","license.key_rotated"],"enabled":false,"description":"ignored","secret":"x"}`, acme...).
			wantStatus(http.StatusOK).licenseData()
		if p["url"] != "https://shop.example/v2" || fmt.Sprint(p["events"]) != "[license.revoked license.key_rotated]" || p["enabled"] != false ||
			p["description"] != "Shop" || p["disabled_reason"] != "disabled by the consumer" || p["disabled_at"] == nil {
			t.Errorf("patched = %v", p)
		}
		p = a.do(http.MethodPatch, "/api/webhook-endpoints/"+id, `{"enabled":true}`, acme...).wantStatus(http.StatusOK).licenseData()
		if p["enabled"] != true || p["disabled_at"] != nil || p["disabled_reason"] != nil || p["url"] != "https://shop.example/v2" {
			t.Errorf("enabled again = %v", p)
		}
		a.do(http.MethodPatch, "/api/webhook-endpoints/"+id, `{}`, acme...).wantStatus(http.StatusOK)

		a.do(http.MethodDelete, "/api/webhook-endpoints/"+id, "", acme...).wantStatus(http.StatusNoContent)
		a.do(http.MethodGet, "/api/webhook-endpoints/"+id, "", acme...).wantStatus(http.StatusNotFound)
		a.do(http.MethodDelete, "/api/webhook-endpoints/"+id, "", acme...).wantStatus(http.StatusNotFound)
		if n := a.endpointRows(); n != 0 {
			t.Errorf("%d endpoints left after the delete", n)
		}
	})
}

func TestWebhookEndpointsTakeForms(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		acme := a.hooks("acme")
		form := append(acme, "Content-Type", "application/x-www-form-urlencoded")
		d := a.do(http.MethodPost, "/api/webhook-endpoints", "url=https%3A%2F%2Fshop.example%2Fh&events[]=license.created&events[]=license.revoked&description=Shop", form...).
			wantStatus(http.StatusCreated).licenseData()
		if fmt.Sprint(d["events"]) != "[license.created license.revoked]" || d["url"] != "https://shop.example/h" {
			t.Errorf("created from a form = %v", d)
		}
		p := a.do(http.MethodPatch, "/api/webhook-endpoints/"+d["id"].(string), "enabled=0", form...).wantStatus(http.StatusOK).licenseData()
		if p["enabled"] != false {
			t.Errorf("enabled=0 left %v", p["enabled"])
		}
	})
}

func TestWebhookEndpointValidation(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		acme := a.hooks("acme")
		cases := []struct{ body, errors string }{
			{`{}`, `{"url":["The url field is required."]}`},
			{`{"url":"  "}`, `{"url":["The url field is required."]}`},
			{`{"url":"ftp://shop.example/h"}`, `{"url":["The url field must start with http:// or https://."]}`},
			{`{"url":"https://shop.example/h","events":["license.bogus"]}`,
				`{"events":["The event type \"license.bogus\" is not one of license.*, license.created, license.revoked, license.suspended, license.reactivated, license.key_rotated, webhook_endpoint.disabled."]}`},
			{`{"url":"https://shop.example/h","events":[]}`, `{"events":["The events field must list at least one event type."]}`},
			{`{"url":"https://shop.example/h","events":"license.created"}`, `{"events":["The events field must be an array."]}`},
			// A wrong type does not hide the other fields' errors, nor theirs the type's;
			// the items' errors (events.N) come last, as Laravel's validator expands the
			// events.* rule after the explicit rules (ValidationRuleParser::explodeRules).
			{`{"url":5,"events":["license.bogus",7],"description":9}`,
				`{"url":["The url field must be a string."],"events":["The event type \"license.bogus\" is not one of license.*, license.created, license.revoked, license.suspended, license.reactivated, license.key_rotated, webhook_endpoint.disabled."],"description":["The description field must be a string."],"events.1":["The events.1 field must be a string."]}`},
			{`{"url":"ftp://x.example","description":{}}`,
				`{"url":["The url field must start with http:// or https://."],"description":["The description field must be a string."]}`},
		}
		for _, tc := range cases {
			r := a.do(http.MethodPost, "/api/webhook-endpoints", tc.body, acme...).wantStatus(http.StatusUnprocessableEntity)
			if !strings.Contains(r.Body.String(), `"errors":`+tc.errors) {
				t.Errorf("%s: %s\nwant errors %s", tc.body, r.Body.String(), tc.errors)
			}
		}
		a.do(http.MethodPost, "/api/webhook-endpoints", `not json`, acme...).wantError(http.StatusBadRequest, "malformed_json")
		a.do(http.MethodPost, "/api/webhook-endpoints", `{"url":"https://shop.example/h"}`, append(acme, "Content-Type", "text/plain")...).
			wantError(http.StatusUnsupportedMediaType, "unsupported_media_type")
		if n := a.endpointRows(); n != 0 {
			t.Fatalf("%d endpoints stored by refused requests", n)
		}

		id := a.endpoint(acme, `{"url":"https://shop.example/h"}`)["id"].(string)
		patches := []struct{ body, errors string }{
			{`{"enabled":"yes"}`, `{"enabled":["The enabled field must be true or false."]}`},
			{`{"enabled":null}`, `{"enabled":["The enabled field must be true or false."]}`},
			{`{"url":null}`, `{"url":["The url field is required."]}`},
			{`{"events":null}`, `{"events":["The events field must list at least one event type."]}`},
			{`{"enabled":"true","url":"ftp://shop.example/h","events":[1]}`,
				`{"url":["The url field must start with http:// or https://."],"events":["The events field must list at least one event type."],"enabled":["The enabled field must be true or false."],"events.0":["The events.0 field must be a string."]}`},
		}
		for _, tc := range patches {
			r := a.do(http.MethodPatch, "/api/webhook-endpoints/"+id, tc.body, acme...).wantStatus(http.StatusUnprocessableEntity)
			if !strings.Contains(r.Body.String(), `"errors":`+tc.errors) {
				t.Errorf("PATCH %s: %s\nwant errors %s", tc.body, r.Body.String(), tc.errors)
			}
		}
		d := a.do(http.MethodGet, "/api/webhook-endpoints/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()
		if d["url"] != "https://shop.example/h" || d["enabled"] != true || fmt.Sprint(d["events"]) != "[license.*]" {
			t.Errorf("a refused PATCH changed the endpoint: %v", d)
		}
	})
}

func TestWebhookEndpointsInProductionRefusePrivateAddresses(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"), withConfig(func(c *config.Config) { c.Webhooks.AllowPrivate, c.Webhooks.RequireHTTPS = false, true }))
	acme := a.hooks("acme")
	for body, msg := range map[string]string{
		`{"url":"http://93.184.215.14/h"}`:    "The url field must start with https://.",
		`{"url":"https://127.0.0.1/h"}`:       "must resolve to public addresses only",
		`{"url":"https://10.0.0.1/h"}`:        "must resolve to public addresses only",
		`{"url":"https://169.254.169.254/h"}`: "must resolve to public addresses only",
		`{"url":"https://[::1]/h"}`:           "must resolve to public addresses only",
	} {
		r := a.do(http.MethodPost, "/api/webhook-endpoints", body, acme...).wantStatus(http.StatusUnprocessableEntity)
		if !strings.Contains(r.Body.String(), msg) {
			t.Errorf("%s: %s, want %q", body, r.Body.String(), msg)
		}
	}
	a.endpoint(acme, `{"url":"https://93.184.215.14/h"}`) // a public address literal: nothing to resolve
}

func TestWebhookEndpointsAreTheCallersOwn(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		acme, globex := a.hooks("acme"), a.hooks("globex")
		id := a.endpoint(acme, `{"url":"https://shop.example/h"}`)["id"].(string)
		a.create(acme, "acme.test")
		a.dispatch()
		delivery := a.deliveries(acme, id, "")["data"].([]any)[0].(map[string]any)["id"].(string)

		for _, r := range []struct{ method, path, body string }{
			{http.MethodGet, "/api/webhook-endpoints/" + id, ""},
			{http.MethodPatch, "/api/webhook-endpoints/" + id, `{"enabled":"not even valid"}`},
			{http.MethodDelete, "/api/webhook-endpoints/" + id, ""},
			{http.MethodGet, "/api/webhook-endpoints/" + id + "/deliveries", ""},
			{http.MethodPost, "/api/webhook-endpoints/" + id + "/deliveries/" + delivery + "/retry", ""},
		} {
			a.do(r.method, r.path, r.body, globex...).wantStatus(http.StatusNotFound)
		}
		if got := a.do(http.MethodGet, "/api/webhook-endpoints", "", globex...).wantStatus(http.StatusOK).json()["data"].([]any); len(got) != 0 {
			t.Errorf("globex lists %v", got)
		}
		// Ids that cannot be ULIDs are 404 before anything is read.
		for _, path := range []string{"/api/webhook-endpoints/nope", "/api/webhook-endpoints/nope/deliveries",
			"/api/webhook-endpoints/" + id + "/deliveries/nope/retry", "/api/webhook-endpoints/nope/deliveries/" + delivery + "/retry"} {
			method := http.MethodGet
			if strings.HasSuffix(path, "/retry") {
				method = http.MethodPost
			}
			a.do(method, path, "", acme...).wantStatus(http.StatusNotFound)
		}
		// A delivery of another endpoint of the caller's is not this one's.
		other := a.endpoint(acme, `{"url":"https://shop.example/other"}`)["id"].(string)
		if got := a.deliveries(acme, other, "")["meta"].(map[string]any)["total"]; got != 0.0 {
			t.Errorf("an endpoint registered after the dispatch lists %v deliveries, want none (another endpoint's)", got)
		}
		a.do(http.MethodPost, "/api/webhook-endpoints/"+other+"/deliveries/"+delivery+"/retry", "", acme...).wantStatus(http.StatusNotFound)
		a.do(http.MethodGet, "/api/webhook-endpoints/"+id, "", acme...).wantStatus(http.StatusOK)
	})
}

func TestWebhookEndpointsNeedWebhooksManage(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		writer := a.consumer("acme") // licenses:read and licenses:write, not webhooks:manage
		a.do(http.MethodPost, "/api/webhook-endpoints", `{"url":"https://shop.example/h"}`, writer...).wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodGet, "/api/webhook-endpoints", "", writer...).wantError(http.StatusForbidden, "missing_ability")
		a.do(http.MethodGet, "/api/webhook-endpoints", "").wantStatus(http.StatusUnauthorized)
		if n := a.endpointRows(); n != 0 {
			t.Errorf("%d endpoints stored without the ability", n)
		}
		a.do(http.MethodGet, "/api/webhook-endpoints", "", bearer(a.token("acme", auth.WebhooksManage))...).wantStatus(http.StatusOK)
	})
}

func TestWebhookEndpointsAreLimited(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"), withPrivateWebhooks())
	acme := a.hooks("acme")
	for i := range webhooks.MaxEndpoints {
		a.endpoint(acme, fmt.Sprintf(`{"url":"https://shop.example/%d"}`, i))
	}
	a.do(http.MethodPost, "/api/webhook-endpoints", `{"url":"https://shop.example/more"}`, acme...).wantError(http.StatusConflict, "too_many_endpoints")
	a.endpoint(a.hooks("globex"), `{"url":"https://shop.example/globex"}`) // per consumer
}

// deliveries reads an endpoint's deliveries with the query.
func (a *app) deliveries(token []string, endpointID, query string) map[string]any {
	a.t.Helper()
	return a.do(http.MethodGet, "/api/webhook-endpoints/"+endpointID+"/deliveries?"+query, "", token...).wantStatus(http.StatusOK).json()
}

func TestWebhookDeliveriesAndRetry(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
		a := newApp(t, db, withPrivateWebhooks(), withClock(clk))
		acme := a.hooks("acme")
		id := a.endpoint(acme, `{"url":"https://shop.example/h"}`)["id"].(string)
		if got := a.deliveries(acme, id, "")["meta"].(map[string]any)["total"]; got != 0.0 {
			t.Fatalf("deliveries before any event: %v", got)
		}
		a.create(acme, "one.test")
		a.create(acme, "two.test")
		a.dispatch()
		feed := a.feed(acme, "").events(t)

		page := a.deliveries(acme, id, "")
		data := page["data"].([]any)
		if page["meta"].(map[string]any)["total"] != 2.0 || len(data) != 2 {
			t.Fatalf("deliveries = %v, want 2", page)
		}
		newest := data[0].(map[string]any)
		if newest["event_id"] != feed[1].ID || newest["event_type"] != "license.created" || newest["status"] != "pending" ||
			newest["endpoint_id"] != id || newest["attempt_count"] != 0.0 || fmt.Sprint(newest["attempts"]) != "[]" || newest["delivered_at"] != nil {
			t.Errorf("the newest delivery = %v, want the second event's, pending, no attempt", newest)
		}
		if a.deliveries(acme, id, "status=delivered")["meta"].(map[string]any)["total"] != 0.0 {
			t.Error("status=delivered lists the pending deliveries")
		}
		paged := a.deliveries(acme, id, "status=pending&per_page=1")
		links := paged["links"].(map[string]any)
		want := testIssuer + "/api/webhook-endpoints/" + id + "/deliveries?status=pending&per_page=1&page=2"
		if links["next"] != want || len(paged["data"].([]any)) != 1 {
			t.Errorf("links.next = %v, want %s", links["next"], want)
		}
		for query, field := range map[string]string{"status=bogus": "status", "per_page=500": "per_page"} {
			m := a.do(http.MethodGet, "/api/webhook-endpoints/"+id+"/deliveries?"+query, "", acme...).wantStatus(http.StatusUnprocessableEntity).json()
			if _, ok := m["errors"].(map[string]any)[field]; !ok {
				t.Errorf("?%s: %v, want an error on %s", query, m, field)
			}
		}

		// A failed delivery retried: pending again, due now.
		did := newest["id"].(string)
		if err := a.db.Gorm.Model(&webhooks.Delivery{}).Where("id = ?", did).Updates(map[string]any{"status": webhooks.StatusFailed, "next_attempt_at": nil}).Error; err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
		r := a.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/deliveries/"+did+"/retry", "", acme...).wantStatus(http.StatusAccepted).licenseData()
		if r["status"] != "pending" || r["next_attempt_at"] != events.Time(clk.Now()) || r["id"] != did {
			t.Errorf("retried = %v, want pending and due at %s", r, events.Time(clk.Now()))
		}
		var retried []audit.Event
		if err := a.db.Gorm.Where("event = ? AND subject_id = ?", audit.WebhookDeliveryRetried, did).Find(&retried).Error; err != nil {
			t.Fatal(err)
		}
		if len(retried) != 1 || retried[0].Actor != audit.ActorToken || retried[0].ActorTokenID == nil || retried[0].ActorConsumerID == nil {
			t.Errorf("the retry's audit events = %+v, want one by the token that asked", retried)
		}

		// One a worker is sending: 409, unchanged; once that worker's lease
		// has lapsed (it died), the claim holds nothing and the retry goes.
		if err := a.db.Gorm.Model(&webhooks.Delivery{}).Where("id = ?", did).
			Updates(map[string]any{"claim": "worker-1", "next_attempt_at": clk.Now().Add(time.Minute)}).Error; err != nil {
			t.Fatal(err)
		}
		a.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/deliveries/"+did+"/retry", "", acme...).wantError(http.StatusConflict, "delivery_in_progress")
		clk.Advance(time.Minute)
		a.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/deliveries/"+did+"/retry", "", acme...).wantStatus(http.StatusAccepted)
		var after webhooks.Delivery
		if err := a.db.Gorm.Where("id = ?", did).Take(&after).Error; err != nil || after.Claim != nil {
			t.Errorf("after a retry over a lapsed claim: %+v, %v; want no claim", after, err)
		}
		// A delivered one retried is pending, and no longer says delivered.
		if err := a.db.Gorm.Model(&webhooks.Delivery{}).Where("id = ?", did).
			Updates(map[string]any{"status": webhooks.StatusDelivered, "delivered_at": clk.Now(), "next_attempt_at": nil}).Error; err != nil {
			t.Fatal(err)
		}
		// A consumer's retries of one endpoint's deliveries go through once a
		// minute: the next within the minute is 429 retry_limited, with the
		// seconds left, and changes nothing.
		limited := a.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/deliveries/"+did+"/retry", "", acme...)
		limited.wantError(http.StatusTooManyRequests, "retry_limited")
		if got := limited.Header().Get("Retry-After"); got != "60" {
			t.Errorf("retry_limited's Retry-After = %q, want 60", got)
		}
		clk.Advance(time.Minute)
		r = a.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/deliveries/"+did+"/retry", "", acme...).wantStatus(http.StatusAccepted).licenseData()
		if r["status"] != "pending" || r["delivered_at"] != nil {
			t.Errorf("a delivered delivery retried = %v, want pending and not delivered", r)
		}
		a.do(http.MethodPost, "/api/webhook-endpoints/"+id+"/deliveries/01JDQ8Z7F0A2B4C6D8E0G2H4J6/retry", "", acme...).wantStatus(http.StatusNotFound)
	})
}

func TestOperatorsListEveryConsumersDeliveries(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withPrivateWebhooks())
		acme, globex := a.hooks("acme"), a.hooks("globex")
		a.endpoint(acme, `{"url":"https://acme.example/h"}`)
		a.endpoint(globex, `{"url":"https://globex.example/h"}`)
		a.create(acme, "acme.test")
		a.create(globex, "globex.test")
		a.dispatch()
		ops := bearer(a.token("ops", auth.IntentsManage))

		all := a.do(http.MethodGet, "/api/webhook-deliveries", "", ops...).wantStatus(http.StatusOK).json()
		if all["meta"].(map[string]any)["total"] != 2.0 {
			t.Fatalf("every delivery: %v", all)
		}
		names := map[string]bool{}
		for _, d := range all["data"].([]any) {
			names[d.(map[string]any)["consumer"].(string)] = true
		}
		if !names["acme"] || !names["globex"] {
			t.Errorf("the deliveries name %v, want acme and globex", names)
		}
		one := a.do(http.MethodGet, "/api/webhook-deliveries?consumer=acme&status=pending", "", ops...).wantStatus(http.StatusOK).json()
		if data := one["data"].([]any); len(data) != 1 || data[0].(map[string]any)["consumer"] != "acme" {
			t.Errorf("?consumer=acme: %v", one)
		}
		if none := a.do(http.MethodGet, "/api/webhook-deliveries?consumer=nobody", "", ops...).wantStatus(http.StatusOK).json(); none["meta"].(map[string]any)["total"] != 0.0 {
			t.Errorf("?consumer=nobody: %v", none)
		}
		a.do(http.MethodGet, "/api/webhook-deliveries?status=bogus", "", ops...).wantStatus(http.StatusUnprocessableEntity)
		a.do(http.MethodGet, "/api/webhook-deliveries", "", acme...).wantError(http.StatusForbidden, "missing_ability")

		// An operator retries any consumer's delivery; a consumer's token may not, not even its own
		// here (its route is under its endpoint); the retry is the operator's in the audit trail.
		did := one["data"].([]any)[0].(map[string]any)["id"].(string)
		a.do(http.MethodPost, "/api/webhook-deliveries/"+did+"/retry", "", acme...).wantError(http.StatusForbidden, "missing_ability")
		r := a.do(http.MethodPost, "/api/webhook-deliveries/"+did+"/retry", "", ops...).wantStatus(http.StatusAccepted).licenseData()
		if r["id"] != did || r["status"] != "pending" {
			t.Errorf("the operator's retry = %v", r)
		}
		var retried []audit.Event
		if err := a.db.Gorm.Where("event = ? AND subject_id = ?", audit.WebhookDeliveryRetried, did).Find(&retried).Error; err != nil ||
			len(retried) != 1 || retried[0].ActorTokenID == nil {
			t.Errorf("the retry's audit events = %+v, %v; want one, by the operator's token", retried, err)
		}
		a.do(http.MethodPost, "/api/webhook-deliveries/01JDQ8Z7F0A2B4C6D8E0G2H4J6/retry", "", ops...).wantStatus(http.StatusNotFound)
		a.do(http.MethodPost, "/api/webhook-deliveries/not-an-id/retry", "", ops...).wantStatus(http.StatusNotFound)
	})
}

func TestWebhookIDsThatCannotBeULIDsTouchNothing(t *testing.T) {
	db := testdb.New(t, "sqlite")
	a := newApp(t, db, withPrivateWebhooks())
	acme := a.hooks("acme")
	var faults []*testdb.Fault
	for _, g := range []*gorm.DB{db.Gorm, db.Read} {
		for _, table := range []string{"webhook_endpoints", "webhook_deliveries"} {
			for _, kind := range []string{"query", "update", "delete"} {
				f := testdb.Inject(t, g, kind, table, nil, errors.New("touched"))
				f.Arm(testdb.Always)
				faults = append(faults, f)
			}
		}
	}
	hits := func() (n int64) {
		for _, f := range faults {
			n += f.Hits()
		}
		return n
	}
	const valid = "01JDQ8Z7F0A2B4C6D8E0G2H4J6"
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/webhook-endpoints/nope"},
		{http.MethodPatch, "/api/webhook-endpoints/nope"},
		{http.MethodDelete, "/api/webhook-endpoints/nope"},
		{http.MethodGet, "/api/webhook-endpoints/nope/deliveries"},
		{http.MethodPost, "/api/webhook-endpoints/nope/deliveries/" + valid + "/retry"},
		{http.MethodPost, "/api/webhook-endpoints/" + valid + "/deliveries/nope/retry"},
	} {
		a.do(r.method, r.path, "{}", acme...).wantStatus(http.StatusNotFound)
	}
	if n := hits(); n != 0 {
		t.Errorf("%d statements reached the endpoints' tables for ids that cannot be", n)
	}
	// The faults do fire for an id that can be one.
	a.do(http.MethodGet, "/api/webhook-endpoints/"+valid, "", acme...)
	if hits() == 0 {
		t.Fatal("the faults never fire: the test proves nothing")
	}
}
