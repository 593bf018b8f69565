package tests

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/licensor-api/licensor/app/webhooks"
)

// The contract lists the classes an attempt's error can be, the very set
// the delivery worker writes (and null).
func TestWebhookAttemptErrorsAreDocumented(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	schema := c.doc.Components.Schemas["WebhookAttempt"].Value.Properties["error"].Value
	var documented []string
	for _, v := range schema.Enum {
		if s, ok := v.(string); ok {
			documented = append(documented, s)
		}
	}
	if !slices.Equal(documented, webhooks.Failures) || !slices.Contains(schema.Enum, any(nil)) {
		t.Errorf("docs/openapi.yaml's WebhookAttempt.error enum = %v, want %v and null", schema.Enum, webhooks.Failures)
	}
}

// The contract holds an attempt's error to the classes: a class and null
// pass, the network's own text (which named addresses and ports) does not.
func TestTheContractHoldsAttemptErrorsToClasses(t *testing.T) {
	page := func(attemptErr string) []byte {
		return []byte(`{"data":[{"id":"01JDQA3N4P5Q6R7S8T9V0W1X2Y","endpoint_id":"01JDQA0B1C2D3E4F5G6H7J8K9M",` +
			`"event_id":"evt_01JDQ9B7C8D9E0F1G2H3J4K5M6","event_type":"license.revoked","status":"pending","attempt_count":1,` +
			`"next_attempt_at":"2026-11-30T11:02:00.000000Z","delivered_at":null,"created_at":"2026-11-30T11:00:01.000000Z",` +
			`"updated_at":"2026-11-30T11:01:00.000000Z","attempts":[{"attempted_at":"2026-11-30T11:01:00.000000Z",` +
			`"response_status":null,"duration_ms":10000,"error":` + attemptErr + `}]}],` +
			`"links":{"first":"http://x/a?page=1","last":"http://x/a?page=1","prev":null,"next":null},` +
			`"meta":{"current_page":1,"from":1,"last_page":1,"links":[],"path":"http://x/a","per_page":15,"to":1,"total":1}}`)
	}
	header := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}, "Cache-Control": {"no-cache, private"}}
	for attemptErr, ok := range map[string]bool{
		`"timeout"`: true, `"address_not_allowed"`: true, `null`: true,
		`"no answer: dial tcp 10.0.0.5:6379: connect: connection refused"`: false, `"answered 500"`: false,
	} {
		req := httptest.NewRequest(http.MethodGet, "/api/webhook-endpoints/01JDQA0B1C2D3E4F5G6H7J8K9M/deliveries", nil)
		err := checkContract(req, http.StatusOK, header, page(attemptErr))
		if ok != (err == nil) {
			t.Errorf("an attempt's error %s: contract says %v, want it passed: %v", attemptErr, err, ok)
		}
	}
}
