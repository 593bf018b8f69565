package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A signed vendor event whose id cannot name an event (a space, non-ASCII,
// over 255 characters) is 400 invalid_event, never a word about an
// Idempotency-Key header; it is counted, logged without its body, and
// recorded nowhere.
func TestVendorWebhookWithAMalformedEventIDIsInvalidEvent(t *testing.T) {
	ids := map[string]string{
		"a space":        "evt 1",
		"non-ASCII":      "evt_é",
		"256 characters": strings.Repeat("e", 256),
	}
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db, withWebhookSecrets(webhookSecret))
		n := 0
		for name, id := range ids {
			t.Run(name, func(t *testing.T) {
				now := time.Now()
				body := vendorEventBody(id, "site.suspended", now, "site_1", "LK-secret-"+name)
				m := a.webhook(body, signature(now, body, webhookSecret)).wantError(http.StatusBadRequest, "invalid_event")
				if msg := m["message"].(string); strings.Contains(msg, "Idempotency-Key") {
					t.Errorf("message %q speaks of a header the vendor never sent", msg)
				}
				n++
				want := fmt.Sprintf(`licensor_vendor_webhooks_refused_total{reason="invalid_event_id"} %d`, n)
				if got := a.metric(`licensor_vendor_webhooks_refused_total{reason="invalid_event_id"}`); got != want {
					t.Errorf("metric: %q, want %q", got, want)
				}
			})
		}
		if got := a.tableRows("idempotency_keys"); got != 0 {
			t.Errorf("%d idempotency records after refused events, want none", got)
		}
		logs := a.logs.String()
		if !strings.Contains(logs, `"reason":"invalid_event_id"`) {
			t.Errorf("no log line of the refusal:\n%s", logs)
		}
		if strings.Contains(logs, "LK-secret") || strings.Contains(logs, "evt_é") {
			t.Errorf("the refused event's body reached the log:\n%s", logs)
		}
	})
}
