package resource

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/events"

	"github.com/licensor-api/licensor/app/idempotency"
)

// Every time is UTC with six fractional digits (truncated, never rounded)
// and Z, whatever its zone; no time is null.
func TestTime(t *testing.T) {
	at := time.Date(2026, 11, 30, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))
	if got := events.Time(at); got != "2026-11-30T10:00:00.123456Z" {
		t.Errorf("Time = %q", got)
	}
	if got := events.Time(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)); got != "2026-11-30T10:00:00.000000Z" {
		t.Errorf("Time of a whole second = %q, want six zero digits", got)
	}
	if got := TimeOrNil(&at); got == nil || *got != events.Time(at) {
		t.Errorf("TimeOrNil = %v, want %q", got, events.Time(at))
	}
	if got := TimeOrNil(nil); got != nil {
		t.Errorf("TimeOrNil(nil) = %q, want nil", *got)
	}
}

// FormatTime reads a body's time, a pointer to one or a time.Time, in UTC;
// none (null, "", the zero time) and text that is no time are "".
func TestFormatTime(t *testing.T) {
	at := time.Date(2026, 11, 30, 11, 0, 5, 123456789, time.FixedZone("CET", 3600))
	s, bad := events.Time(at), "2026-11-30"
	for _, v := range []any{s, &s, at, &at} {
		if got := FormatTime(v, time.RFC3339); got != "2026-11-30T10:00:05Z" {
			t.Errorf("FormatTime(%T) = %q", v, got)
		}
	}
	for _, v := range []any{"", (*string)(nil), &bad, time.Time{}, (*time.Time)(nil), nil} {
		if got := FormatTime(v, time.RFC3339); got != "" {
			t.Errorf("FormatTime(%#v) = %q, want none", v, got)
		}
	}
}

// The objects' JSON, byte for byte, as the API has always answered it
// (docs/openapi.yaml's Operation and Intent): every Intent field present,
// an empty one null, except consumer (a string, "" for a consumer with no
// name; null with consumer_id for an intent of no consumer's) and result (absent until completed, and its location absent but
// for a create).
func TestIntentJSON(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	next := at.Add(time.Minute)
	for _, c := range []struct {
		in                  idempotency.Intent
		consumer            string
		operation, operator string
	}{
		{
			idempotency.Intent{ID: "01A", ConsumerID: "c1", Operation: "licenses.store", Status: idempotency.StatusPending, Attempts: 2,
				KeyDigest: "abc", ExternalRef: "acme.test", CorrelationID: "req", RequestedBy: "tok", NextAttemptAt: &next,
				CreatedAt: at, UpdatedAt: at.Add(time.Second)},
			"acme",
			`{"id":"01A","operation":"licenses.store","status":"pending","attempts":2,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:01.123456Z"}`,
			`{"id":"01A","operation":"licenses.store","status":"pending","attempts":2,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:01.123456Z","consumer":"acme","consumer_id":"c1","key_digest":"abc","key_source":"client","external_ref":"acme.test","resource_type":null,"resource_id":null,"request_id":"req","token_id":"tok","next_attempt_at":"2026-11-30T09:01:00.123456Z"}`,
		},
		{
			idempotency.Intent{ID: "01B", ConsumerID: "c2", Operation: "licenses.store", Status: idempotency.StatusCompleted, Attempts: 1,
				KeyDigest: "def", Auto: true, ResourceType: "license", ResourceID: "L1", CreatedAt: at, UpdatedAt: at,
				Result: &idempotency.Result{Status: 201, Location: "/api/licenses/L1"}},
			"",
			`{"id":"01B","operation":"licenses.store","status":"completed","attempts":1,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:00.123456Z","result":{"status":201,"location":"/api/licenses/L1"}}`,
			`{"id":"01B","operation":"licenses.store","status":"completed","attempts":1,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:00.123456Z","result":{"status":201,"location":"/api/licenses/L1"},"consumer":"","consumer_id":"c2","key_digest":"def","key_source":"server","external_ref":null,"resource_type":"license","resource_id":"L1","request_id":null,"token_id":null,"next_attempt_at":null}`,
		},
		{
			idempotency.Intent{ID: "01C", ConsumerID: "c3", Operation: "licenses.destroy", Status: idempotency.StatusCompleted,
				CreatedAt: at, UpdatedAt: at, Result: &idempotency.Result{Status: 204}},
			"globex",
			`{"id":"01C","operation":"licenses.destroy","status":"completed","attempts":0,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:00.123456Z","result":{"status":204}}`,
			`{"id":"01C","operation":"licenses.destroy","status":"completed","attempts":0,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:00.123456Z","result":{"status":204},"consumer":"globex","consumer_id":"c3","key_digest":"","key_source":"client","external_ref":null,"resource_type":null,"resource_id":null,"request_id":null,"token_id":null,"next_attempt_at":null}`,
		},
		{
			idempotency.Intent{ID: "01D", Operation: "webhooks.vendor", Status: idempotency.StatusCompleted, Attempts: 1,
				KeyDigest: "0a1", ResourceType: "site", ExternalRef: "site_1", CorrelationID: "req-hook",
				CreatedAt: at, UpdatedAt: at, Result: &idempotency.Result{Status: 200}},
			"",
			`{"id":"01D","operation":"webhooks.vendor","status":"completed","attempts":1,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:00.123456Z","result":{"status":200}}`,
			`{"id":"01D","operation":"webhooks.vendor","status":"completed","attempts":1,"created_at":"2026-11-30T09:00:00.123456Z","updated_at":"2026-11-30T09:00:00.123456Z","result":{"status":200},"consumer":null,"consumer_id":null,"key_digest":"0a1","key_source":"client","external_ref":"site_1","resource_type":"site","resource_id":null,"request_id":"req-hook","token_id":null,"next_attempt_at":null}`,
		},
	} {
		if got := marshal(t, NewOperation(c.in)); got != c.operation {
			t.Errorf("NewOperation(%s) =\n%s\nwant\n%s", c.in.ID, got, c.operation)
		}
		if got := marshal(t, NewIntent(c.in, c.consumer)); got != c.operator {
			t.Errorf("NewIntent(%s) =\n%s\nwant\n%s", c.in.ID, got, c.operator)
		}
	}
}

// NewIntents names each intent's consumer, keeps the order, and is an
// empty array, not null, for no intents.
func TestNewIntents(t *testing.T) {
	if got := marshal(t, NewIntents(nil, nil)); got != "[]" {
		t.Errorf("NewIntents(nil) = %s, want []", got)
	}
	got := NewIntents([]idempotency.Intent{{ID: "1", ConsumerID: "c1"}, {ID: "2", ConsumerID: "gone"}, {ID: "3", ConsumerID: "c1"}},
		map[string]string{"c1": "acme"})
	if len(got) != 3 || got[0].ID != "1" || got[1].ID != "2" || got[2].ID != "3" {
		t.Fatalf("NewIntents = %+v, want 1, 2, 3 in order", got)
	}
	name := func(v Intent) string {
		if v.Consumer == nil {
			return "<nil>"
		}
		return *v.Consumer
	}
	if name(got[0]) != "acme" || name(got[1]) != "" || name(got[2]) != "acme" {
		t.Errorf("consumers = %q, %q, %q; want acme, \"\", acme", name(got[0]), name(got[1]), name(got[2]))
	}
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
