package web

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/internal/ptr"
)

type timelineEntry struct {
	At        time.Time
	What      string // "Created", "Retried", …
	Outcome   string // a status word the entry is shown with ("" for none)
	By        string // who acted, in words: a token's consumer, the reconciler, …
	TokenID   string // the acting token, when one acted
	RequestID string
	Detail    string // the reason, the result: plain text
}

// timeline is the intent's history: its creation (the token that asked and
// its request), each event of its audit trail (oldest first), and its
// completion with the result it answered. names are consumer names by id.
func timeline(in idempotency.Intent, trail []audit.Event, names map[string]string) []timelineEntry {
	out := []timelineEntry{{At: in.CreatedAt, What: "Created", By: tokenActor(in.RequestedBy, names[in.ConsumerID]),
		TokenID: in.RequestedBy, RequestID: in.CorrelationID, Detail: "operation " + in.Operation}}
	if in.ConsumerID == "" {
		out[0].By = "the vendor (a webhook)"
	}
	for _, e := range trail {
		out = append(out, trailEntry(e, names))
	}
	if in.Status == idempotency.StatusCompleted && in.Result != nil {
		detail := "answered " + strconv.Itoa(in.Result.Status)
		if in.Result.Location != "" {
			detail += ", location " + in.Result.Location
		}
		out = append(out, timelineEntry{At: in.UpdatedAt, What: "Completed", Outcome: idempotency.StatusCompleted, Detail: detail})
	}
	return out
}

// trailEntry is an audit event of the intent as a step of its history.
func trailEntry(e audit.Event, names map[string]string) timelineEntry {
	t := timelineEntry{At: e.CreatedAt, What: e.Event, By: eventActor(e, names), RequestID: ptr.Deref(e.RequestID), TokenID: ptr.Deref(e.ActorTokenID)}
	switch e.Event {
	case audit.IntentRetried:
		t.What, t.Outcome = "Retried", idempotency.StatusPending
		t.Detail = "put back to pending, its attempts reset"
	case audit.IntentDiscarded:
		t.What, t.Outcome = "Discarded", idempotency.StatusDiscarded
		t.Detail = "reason: " + ptr.Deref(e.Reason)
	case audit.IntentAttempted:
		t.What, t.By = "Attempted by the reconciler", "the reconciler"
		if a, err := idempotency.ParseAttempt(ptr.Deref(e.Reason)); err == nil {
			t.What, t.Outcome, t.Detail = "Attempt "+strconv.Itoa(a.Number), a.Result, attemptDetail(a)
		}
	}
	return t
}

// attemptDetail is what came of a reconciler's attempt, in words.
func attemptDetail(a idempotency.Attempt) string {
	s := cmp.Or(attemptResults[a.Result], a.Result)
	if a.Class != "" {
		s += " (" + strings.ReplaceAll(a.Class, "_", " ") + ")"
	}
	if a.Next != nil {
		s += "; next attempt at " + formatTime(*a.Next)
	}
	return s
}

// attemptResults are the results an attempt's reason records (those
// app/metrics counts too), in words.
var attemptResults = map[string]string{
	"completed":  "completed: the effect was found or made",
	"waiting":    "nothing found at the vendor yet, too young to create",
	"retry":      "did not finish, tried again later",
	"failed":     "failed: an operator should look",
	"superseded": "superseded: a later change made it moot",
}

// eventActor is who made an audit event, in words.
func eventActor(e audit.Event, names map[string]string) string {
	switch e.Actor {
	case audit.ActorToken:
		name := ""
		if e.ActorConsumerID != nil {
			name = names[*e.ActorConsumerID]
		}
		return tokenActor(ptr.Deref(e.ActorTokenID), name)
	case audit.ActorConsole:
		return "an operator at the command line"
	case audit.ActorReconciler:
		return "the reconciler"
	}
	return e.Actor
}

// tokenActor is who acted with a token, in words: its consumer (the page
// shows the token's id beside it).
func tokenActor(tokenID, consumer string) string {
	if tokenID == "" {
		return "no token"
	}
	return cmp.Or(consumer, "a consumer no longer on record")
}
