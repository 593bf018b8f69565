package tests

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

const webhookSecret = "whsec_test_secret"

// withWebhookSecrets sets VENDOR_WEBHOOK_SECRET.
func withWebhookSecrets(secrets ...string) option {
	return withConfig(func(c *config.Config) { c.Vendor.WebhookSecrets = secrets })
}

// vendorEventBody is a webhook body for the site of acme.test.
func vendorEventBody(id, typ string, created time.Time, siteID, key string) string {
	return vendorEventBodyFor(id, typ, created, siteID, "acme.test", key)
}

// vendorEventBodyFor is a webhook body for the site of the domain.
func vendorEventBodyFor(id, typ string, created time.Time, siteID, domain, key string) string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"site":{"id":%q,"name":"Acme","domain":%q,"license_key":%q,"status":"active"}}}`,
		id, typ, created.Unix(), siteID, domain, key)
}

// eventIntent is what a delivery of the vendor event body keeps on its
// record, for a test that plants one: the intent, the body's canonical
// JSON (object keys sorted at every depth, no white space, numbers as
// written), and its fingerprint as a Do call of operation makes it, the
// hex SHA-256 of "DO", the operation's name and the intent, NUL-separated.
// A redelivery of body matches such a record (else 409 event_conflict).
func eventIntent(t *testing.T, operation, body string) (intent []byte, fingerprint string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var canonical bytes.Buffer
	enc := json.NewEncoder(&canonical)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		t.Fatal(err)
	}
	intent = bytes.TrimSuffix(canonical.Bytes(), []byte("\n"))
	sum := sha256.Sum256(slices.Concat([]byte("DO\x00"+operation+"\x00"), intent))
	return intent, hex.EncodeToString(sum[:])
}

// signature is the Vendor-Signature of body at t under each secret.
func signature(t time.Time, body string, secrets ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	h := "t=" + ts
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + body))
		h += ",v1=" + hex.EncodeToString(mac.Sum(nil))
	}
	return h
}

// webhook delivers body signed at t.
func (a *app) webhook(body, sig string) *response {
	a.t.Helper()
	headers := []string{"Content-Type", "application/json"}
	if sig != "" {
		headers = append(headers, "Vendor-Signature", sig)
	}
	return a.do(http.MethodPost, "/api/webhooks/vendor", body, headers...)
}

// licenseEventNames lists a license's audit trail as "event by actor".
func (a *app) licenseEventNames(token []string, id string) []string {
	a.t.Helper()
	var out []string
	for _, e := range a.do(http.MethodGet, "/api/licenses/"+id+"/events", "", token...).wantStatus(http.StatusOK).json()["data"].([]any) {
		m := e.(map[string]any)
		out = append(out, fmt.Sprint(m["event"], " by ", m["actor"]))
	}
	return out
}

func countOf(list []string, want string) int {
	n := 0
	for _, s := range list {
		if s == want {
			n++
		}
	}
	return n
}

// A signed event reaches the license once, however often it is delivered
// (50 deliveries at once here), on both databases: suspended, still listed
// and still holding its domain; reactivated; its key rotated; deleted.
func TestVendorWebhookAppliesEachEventOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		id, site := lic["id"].(string), lic["vendor_site_id"].(string)
		now := time.Now()

		body := vendorEventBody("evt_1", "site.suspended", now.Add(-time.Minute), site, "")
		var wg sync.WaitGroup
		codes := make([]int, 50)
		for i := range codes {
			wg.Go(func() { codes[i] = a.webhook(body, signature(now, body, webhookSecret)).Code })
		}
		wg.Wait()
		for i, code := range codes {
			if code != http.StatusOK && code != http.StatusConflict {
				t.Fatalf("delivery %d: %d, want 200 (or 409 while the first runs)", i, code)
			}
		}
		// A redelivery after the fact is a 200 that changes nothing.
		a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
		a.wantLicenseStatus(t, acme, id, "suspended", "status after site.suspended = %v")
		if n := countOf(a.licenseEventNames(acme, id), "suspended by vendor"); n != 1 {
			t.Errorf("%d suspended events for 51 deliveries, want 1", n)
		}
		list := a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK).json()["data"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["status"] != "suspended" {
			t.Errorf("the list = %v, want the suspended license", list)
		}
		a.do(http.MethodPost, "/api/licenses", `{"name":"Other","domain":"acme.test"}`, a.consumer("globex")...).
			wantError(http.StatusConflict, "domain_taken")

		body = vendorEventBody("evt_2", "site.reactivated", now.Add(-50*time.Second), site, "")
		a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
		body = vendorEventBody("evt_3", "site.key_rotated", now.Add(-40*time.Second), site, "LK-rotated")
		a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
		got := a.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK).licenseData()
		if got["status"] != "active" || got["license_key"] != "LK-rotated" {
			t.Fatalf("after reactivated and key_rotated: %v %v", got["status"], got["license_key"])
		}

		body = vendorEventBody("evt_4", "site.deleted", now.Add(-30*time.Second), site, "")
		a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
		a.wantLicenseStatus(t, acme, id, "revoked", "status after site.deleted = %v")
		want := []string{"created by request", "suspended by vendor", "reactivated by vendor", "key_rotated by vendor", "revoked by vendor"}
		if got := a.licenseEventNames(acme, id); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events = %v, want %v", got, want)
		}
		// The domain is free again.
		a.do(http.MethodPost, "/api/licenses", `{"name":"Other","domain":"acme.test"}`, a.consumer("globex")...).wantStatus(http.StatusCreated)
	})
}

// An event older than the last one applied changes nothing: deliveries out
// of order never move a license back.
func TestVendorWebhookOutOfOrderNeverMovesBack(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"), withWebhookSecrets(webhookSecret))
	acme := a.consumer("acme")
	lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
	id, site := lic["id"].(string), lic["vendor_site_id"].(string)
	now := time.Now()
	newer := vendorEventBody("evt_new", "site.suspended", now.Add(-time.Minute), site, "")
	older := vendorEventBody("evt_old", "site.reactivated", now.Add(-2*time.Minute), site, "")
	a.webhook(newer, signature(now, newer, webhookSecret)).wantStatus(http.StatusOK)
	a.webhook(older, signature(now, older, webhookSecret)).wantStatus(http.StatusOK)
	a.wantLicenseStatus(t, acme, id, "suspended", "status = %v after a late, older reactivation; want suspended")
	// A suspended license can still be revoked by its consumer.
	a.do(http.MethodDelete, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusNoContent)
}

// Only the vendor's signature is accepted: forged, missing, or stale
// signatures change nothing; during a rotation either secret signs.
func TestVendorWebhookSignature(t *testing.T) {
	a := newApp(t, testdb.New(t, "sqlite"), withWebhookSecrets("whsec_new", "whsec_old"))
	acme := a.consumer("acme")
	lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
	id, site := lic["id"].(string), lic["vendor_site_id"].(string)
	now := time.Now()
	body := vendorEventBody("evt_sig", "site.suspended", now, site, "")

	a.webhook(body, "").wantError(http.StatusUnauthorized, "invalid_signature")
	a.webhook(body, signature(now, body, "whsec_forged")).wantError(http.StatusUnauthorized, "invalid_signature")
	a.webhook(body, "t=x,v1=00").wantError(http.StatusUnauthorized, "invalid_signature")
	tampered := vendorEventBody("evt_sig", "site.deleted", now, site, "")
	a.webhook(tampered, signature(now, body, "whsec_new")).wantError(http.StatusUnauthorized, "invalid_signature")
	stale := now.Add(-6 * time.Minute)
	a.webhook(body, signature(stale, body, "whsec_new")).wantError(http.StatusBadRequest, "signature_expired")
	a.wantLicenseStatus(t, acme, id, "active", "status = %v after refused deliveries, want active")
	// The vendor signs with its old and its new secret during a rotation.
	a.webhook(body, signature(now, body, "whsec_unknown", "whsec_old")).wantStatus(http.StatusOK)
	a.wantLicenseStatus(t, acme, id, "suspended", "status = %v after a delivery signed with the old secret, want suspended")
	// Without a secret every webhook is refused.
	b := newApp(t, testdb.New(t, "sqlite"))
	b.webhook(body, signature(now, body, "whsec_new")).wantError(http.StatusUnauthorized, "invalid_signature")
}

// An event created more than the tolerance ahead of now, or in
// milliseconds (a date millennia away), is refused (400 invalid_event)
// before anything is recorded: it would outrank every real event of its
// license. A real event afterwards is applied.
func TestVendorWebhookFromTheFutureIsRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		site, now := lic["vendor_site_id"].(string), time.Now()
		for name, created := range map[string]time.Time{
			"three years ahead": now.AddDate(3, 0, 0),
			"in milliseconds":   time.Unix(now.UnixMilli(), 0),
		} {
			body := vendorEventBody("evt_future_"+strconv.Itoa(int(created.Unix()%1000)), "site.suspended", created, site, "")
			if r := a.webhook(body, signature(now, body, webhookSecret)); r.Code != http.StatusBadRequest {
				t.Errorf("%s: %d %s, want 400 invalid_event", name, r.Code, r.Body.String())
			} else {
				r.wantError(http.StatusBadRequest, "invalid_event")
			}
		}
		var n int64
		db.Gorm.Table("idempotency_keys").Where("operation = ?", "webhooks.vendor").Count(&n)
		if n != 0 {
			t.Errorf("%d webhook intents recorded for refused events, want none", n)
		}
		body := vendorEventBody("evt_real", "site.suspended", now.Add(-time.Minute), site, "")
		a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
		a.wantLicenseStatus(t, acme, lic["id"].(string), "suspended", "status after a real event = %v, want suspended")
	})
}

// A license frozen before webhooks bounded created (a mark ahead of now;
// on SQLite, one in milliseconds that no read could parse and that failed
// every read of the license) is repaired by migration 00013: its reads
// answer again, and the next real event applies.
func TestVendorEventMarksFromTheFutureAreRepaired(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		now := time.Now()
		marks := map[string]time.Time{"ahead": now.AddDate(3, 0, 0)}
		if db.Dialect == database.SQLite {
			marks["in milliseconds"] = time.Unix(now.UnixMilli(), 0) // MariaDB refuses to store it
		}
		m, err := database.NewMigrator(db.Gorm)
		if err != nil {
			t.Fatal(err)
		}
		// The licenses are made by this build, on the whole schema; the marks
		// are set on schema 12, as that build could have left them.
		ids := map[string]string{}
		for name := range marks {
			body := `{"name":"Acme","domain":"` + strings.ReplaceAll(name, " ", "-") + `.frozen.test"}`
			lic := a.do(http.MethodPost, "/api/licenses", body, acme...).wantStatus(http.StatusCreated).licenseData()
			ids[name] = lic["id"].(string) + " " + lic["vendor_site_id"].(string) + " " + lic["domain"].(string)
		}
		for { // down to 12, whatever came after 13
			v, err := m.Down(context.Background())
			if err != nil || v < 13 {
				t.Fatalf("migrate down = %d, %v; want 13 rolled back", v, err)
			}
			if v == 13 {
				break
			}
		}
		for name, mark := range marks {
			id := strings.Fields(ids[name])[0]
			if err := db.Gorm.Exec("UPDATE licenses SET vendor_event_at = ? WHERE id = ?", mark.UTC(), id).Error; err != nil {
				t.Fatalf("%s: store the mark: %v", name, err)
			}
		}
		if _, err := m.Up(context.Background()); err != nil {
			t.Fatal(err)
		}
		for name, both := range ids {
			f := strings.Fields(both)
			id, site, domain := f[0], f[1], f[2]
			a.do(http.MethodGet, "/api/licenses/"+id, "", acme...).wantStatus(http.StatusOK)
			body := vendorEventBodyFor("evt_after_repair_"+site, "site.suspended", now.Add(-time.Minute), site, domain, "")
			a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
			a.wantLicenseStatus(t, acme, id, "suspended", name+": status after a real event = %v, want suspended (the mark still outranks it)")
		}
		a.do(http.MethodGet, "/api/licenses", "", acme...).wantStatus(http.StatusOK)
	})
}

// An event id delivered again with another body is refused in the
// webhook's own words (409 event_conflict naming the id), and changes
// nothing; the first body's redelivery is still a 200.
func TestVendorWebhookEventIdReusedIsAConflict(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		site, now := lic["vendor_site_id"].(string), time.Now()
		first := vendorEventBody("evt_twice", "site.suspended", now.Add(-time.Minute), site, "")
		a.webhook(first, signature(now, first, webhookSecret)).wantStatus(http.StatusOK)
		other := vendorEventBody("evt_twice", "site.reactivated", now.Add(-30*time.Second), site, "")
		body := a.webhook(other, signature(now, other, webhookSecret)).wantError(http.StatusConflict, "event_conflict")
		if msg, _ := body["message"].(string); !strings.Contains(msg, "evt_twice") {
			t.Errorf("message %q does not name the event", msg)
		}
		a.wantLicenseStatus(t, acme, lic["id"].(string), "suspended", "status after the conflicting event = %v, want it unchanged")
		a.webhook(first, signature(now, first, webhookSecret)).wantStatus(http.StatusOK)
	})
}

// The operator views show a vendor event's intent as the document says:
// operation webhooks.vendor, no consumer (consumer and consumer_id null),
// its site as external_ref; in the list, alone and filtered by status,
// after a conflicting redelivery of its id too. Every response here is
// checked against docs/openapi.yaml (the in-process client does that).
func TestVendorWebhookIntentsInOperatorViews(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		admin := bearer(a.token("ops", "intents:manage"))
		lic := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...).wantStatus(http.StatusCreated).licenseData()
		site, now := lic["vendor_site_id"].(string), time.Now()
		event := vendorEventBody("evt_seen", "site.suspended", now.Add(-time.Minute), site, "")
		a.webhook(event, signature(now, event, webhookSecret)).wantStatus(http.StatusOK)
		other := vendorEventBody("evt_seen", "site.deleted", now.Add(-time.Minute), site, "")
		a.webhook(other, signature(now, other, webhookSecret)).wantError(http.StatusConflict, "event_conflict")

		list := a.do(http.MethodGet, "/api/intents?status=completed", "", admin...).wantStatus(http.StatusOK).json()
		var hook map[string]any
		for _, v := range list["data"].([]any) {
			in := v.(map[string]any)
			switch in["operation"] {
			case "webhooks.vendor":
				if hook != nil {
					t.Errorf("a second webhook intent %v: the conflicting redelivery was recorded", in)
				}
				hook = in
			case "licenses.store":
				if in["consumer"] != "acme" || in["consumer_id"] == nil {
					t.Errorf("the consumer's create shows consumer %v (%v), want acme", in["consumer"], in["consumer_id"])
				}
			}
		}
		if hook == nil {
			t.Fatalf("no webhooks.vendor intent in %v", list["data"])
		}
		if v, ok := hook["consumer"]; !ok || v != nil {
			t.Errorf("webhook intent consumer = %v (present %v), want null", v, ok)
		}
		if v, ok := hook["consumer_id"]; !ok || v != nil {
			t.Errorf("webhook intent consumer_id = %v (present %v), want null", v, ok)
		}
		if hook["external_ref"] != site || hook["resource_type"] != "site" || hook["token_id"] != nil {
			t.Errorf("webhook intent = %v, want its site %s, resource_type site, no token", hook, site)
		}
		one := a.do(http.MethodGet, "/api/intents/"+hook["id"].(string), "", admin...).wantStatus(http.StatusOK).json()["data"].(map[string]any)
		if one["operation"] != "webhooks.vendor" || one["consumer"] != nil || one["consumer_id"] != nil {
			t.Errorf("GET the webhook intent = %v, want webhooks.vendor and no consumer", one)
		}
		// A consumer never sees it, not even by its id.
		a.do(http.MethodGet, "/api/operations/"+hook["id"].(string), "", acme...).wantStatus(http.StatusNotFound)
	})
}

// The audit trail's actor is what the server knows acted, never a header:
// a consumer's request with X-Request-Id "vendor" (or "reconciler") is
// shown as actor request, its id kept as request_id, correlation only.
func TestAuditActorIsNeverAClientHeader(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		for _, spoof := range []string{"vendor", "reconciler"} {
			body := `{"name":"Acme","domain":"` + spoof + `.spoof.test"}`
			id := a.do(http.MethodPost, "/api/licenses", body, append(acme, "X-Request-Id", spoof)...).wantStatus(http.StatusCreated).licenseData()["id"].(string)
			events := a.do(http.MethodGet, "/api/licenses/"+id+"/events", "", acme...).wantStatus(http.StatusOK).json()["data"].([]any)
			if len(events) != 1 {
				t.Fatalf("%d events, want the creation", len(events))
			}
			e := events[0].(map[string]any)
			if e["actor"] != "request" || e["request_id"] != spoof || e["token_id"] == nil {
				t.Errorf("X-Request-Id %q: event %v, want actor request, request_id %q and the token", spoof, e, spoof)
			}
		}
	})
}

// A site is matched by its id AND its domain: an event for a site id a
// license holds, but for another domain (the vendor gave the id again) or
// with no domain, is received (200, so the vendor stops redelivering), not
// applied, logged at Warn with its event and site ids, and counted in
// licensor_vendor_site_mismatches_total{source="webhook"}. The license's own
// domain (case aside) applies.
func TestVendorWebhookMatchesSiteIdAndDomain(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		acme := a.consumer("acme")
		lic := a.do(http.MethodPost, "/api/licenses", `{"name":"Old","domain":"old.test"}`, acme...).wantStatus(http.StatusCreated).licenseData()
		id, site := lic["id"].(string), lic["vendor_site_id"].(string)
		now := time.Now()
		for i, body := range []string{
			vendorEventBodyFor("evt_other", "site.suspended", now.Add(-time.Minute), site, "new.test", ""),
			vendorEventBodyFor("evt_none", "site.deleted", now.Add(-time.Minute), site, "", ""),
			fmt.Sprintf(`{"id":"evt_absent","type":"site.deleted","created":%d,"data":{"site":{"id":%q}}}`, now.Add(-time.Minute).Unix(), site),
		} {
			got := a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK).json()
			if got["received"] != true {
				t.Errorf("event %d answered %v", i, got)
			}
		}
		a.wantLicenseStatus(t, acme, id, "active", "status after events of another domain = %v, want active")
		const want = `licensor_vendor_site_mismatches_total{source="webhook"} 3`
		if body := a.do(http.MethodGet, "/metrics", "").wantStatus(http.StatusOK).Body.String(); !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
		logs := a.logs.String()
		for _, w := range []string{`"event_id":"evt_other"`, `"event_id":"evt_none"`, `"event_id":"evt_absent"`, `"site_id":"` + site + `"`, `"level":"WARN"`} {
			if !strings.Contains(logs, w) {
				t.Errorf("logs lack %s", w)
			}
		}
		body := vendorEventBodyFor("evt_own", "site.suspended", now.Add(-time.Minute), site, "OLD.test", "")
		a.webhook(body, signature(now, body, webhookSecret)).wantStatus(http.StatusOK)
		a.wantLicenseStatus(t, acme, id, "suspended", "status after an event of its own domain = %v, want suspended")
	})
}
