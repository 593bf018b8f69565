package web

import (
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/idempotency"
)

// A pager links the pages either side of its own, keeping the filter's
// values (an empty one left out); a page past the last links back to the
// last. An endpoint's page of deliveries keeps its status filter.
func TestNewPager(t *testing.T) {
	q := map[string]string{"status": "failed", "consumer": "a&b", "operation": ""}
	const n = endpointDeliveriesPerPage
	ep := Prefix + "/webhooks/endpoints/01JDQ8Z7F0A2B4C6D8E0G2H4J6"
	for _, c := range []struct {
		path       string
		filter     map[string]string
		page, per  int
		total      int64
		last       int
		prev, next string
	}{
		{"/console/intents", q, 1, 50, 0, 1, "", ""},
		{"/console/intents", q, 1, 50, 50, 1, "", ""},
		{"/console/intents", q, 1, 50, 51, 2, "", "/console/intents?consumer=a%26b&page=2&status=failed"},
		{"/console/intents", q, 2, 50, 101, 3, "/console/intents?consumer=a%26b&page=1&status=failed", "/console/intents?consumer=a%26b&page=3&status=failed"},
		{"/console/intents", q, 9, 50, 51, 2, "/console/intents?consumer=a%26b&page=2&status=failed", ""},
		{ep, map[string]string{"status": ""}, 1, n, 0, 1, "", ""},
		{ep, map[string]string{"status": ""}, 1, n, n, 1, "", ""},
		{ep, map[string]string{"status": ""}, 1, n, n + 1, 2, "", ep + "?page=2"},
		{ep, map[string]string{"status": "failed"}, 2, n, 3 * n, 3, ep + "?page=1&status=failed", ep + "?page=3&status=failed"},
		{ep, map[string]string{"status": ""}, 3, n, 3 * n, 3, ep + "?page=2", ""},
	} {
		p := newPager(c.path, c.filter, c.page, c.per, c.total)
		if p.LastPage != c.last || p.Prev != c.prev || p.Next != c.next || p.Total != c.total {
			t.Errorf("%s page %d of %d rows: %+v, want last %d, prev %q, next %q", c.path, c.page, c.total, p, c.last, c.prev, c.next)
		}
	}
}

// The history starts with the creation, follows the trail in its order,
// and ends with the completion and its result; an actor is named by its
// consumer, a token's id kept apart.
func TestTimeline(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	in := idempotency.Intent{ID: "01I", ConsumerID: "c1", Operation: "licenses.store", Status: idempotency.StatusCompleted,
		RequestedBy: "tok1", CorrelationID: "req-1", CreatedAt: at, UpdatedAt: at.Add(time.Hour),
		Result: &idempotency.Result{Status: 201, Location: "/api/licenses/01L"}}
	ops, tok2, req2, reason := "c2", "tok2", "req-2", "cancelled"
	attempt := "attempt 2: retry (vendor_unavailable), next at 2026-12-01T10:00:30.000000Z" // as the reconciler records it
	garbled := "not an attempt"
	trail := []audit.Event{
		{Event: audit.IntentAttempted, Actor: audit.ActorReconciler, Reason: &attempt, CreatedAt: at},
		{Event: audit.IntentAttempted, Actor: audit.ActorReconciler, Reason: &garbled, CreatedAt: at},
		{Event: audit.IntentRetried, Actor: audit.ActorToken, ActorConsumerID: &ops, ActorTokenID: &tok2, RequestID: &req2, CreatedAt: at.Add(time.Minute)},
		{Event: audit.IntentDiscarded, Actor: audit.ActorConsole, Reason: &reason, CreatedAt: at.Add(2 * time.Minute)},
	}
	got := timeline(in, trail, map[string]string{"c1": "acme", "c2": "ops"})
	want := []timelineEntry{
		{At: at, What: "Created", By: "acme", TokenID: "tok1", RequestID: "req-1", Detail: "operation licenses.store"},
		{At: at, What: "Attempt 2", Outcome: "retry", By: "the reconciler",
			Detail: "did not finish, tried again later (vendor unavailable); next attempt at 2026-12-01 10:00:30 UTC"},
		{At: at, What: "Attempted by the reconciler", By: "the reconciler"},
		{At: at.Add(time.Minute), What: "Retried", Outcome: "pending", By: "ops", TokenID: "tok2", RequestID: "req-2", Detail: "put back to pending, its attempts reset"},
		{At: at.Add(2 * time.Minute), What: "Discarded", Outcome: "discarded", By: "an operator at the command line", Detail: "reason: cancelled"},
		{At: at.Add(time.Hour), What: "Completed", Outcome: "completed", Detail: "answered 201, location /api/licenses/01L"},
	}
	if len(got) != len(want) {
		t.Fatalf("timeline = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	vendor := timeline(idempotency.Intent{Operation: "webhooks.vendor", Status: idempotency.StatusPending}, nil, nil)
	if len(vendor) != 1 || vendor[0].By != "the vendor (a webhook)" {
		t.Errorf("a vendor's intent: %+v", vendor)
	}
}

// A key is masked to its last four characters, and never shows more than
// half of itself.
func TestKeyTail(t *testing.T) {
	for key, want := range map[string]string{"LK-0123456789-a1b2": "a1b2", "abcdefgh": "efgh", "abcdef": "def", "ab": "b", "": "", "ключ-ключ": "ключ"} {
		if got := keyTail(key); got != want {
			t.Errorf("keyTail(%q) = %q, want %q", key, got, want)
		}
	}
}
