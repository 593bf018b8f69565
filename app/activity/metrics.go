package activity

import (
	"errors"
)

// The metrics licensor counts. Which guard outcome (app/idempotency's
// Outcome, what Guard's Observe is told) counts in which is
// ObserveIdempotency's mapping:
//
//   - replayed → Replays: a stored answer sent again.
//   - in_progress and mismatch → Conflicts: a 409 (the key's request still
//     runs, or its owner lost it) and a 422 (the key reused with another
//     request).
//   - pending → Pending: a 202, for a new intent kept pending and for a
//     retry of one still pending.
//   - executed, taken_over, released, not_kept, superseded, discarded count
//     in none.
//
// Creates are not counted from the guard: "executed" of licenses.store is
// told for a create that answered 201, but also for a completion whose
// settle then failed, and not for a create the reconciler finishes, nor a
// keyless one that had no record to settle. They are counted where a
// license is made: the licenses service's commit of a new license row
// (licenses.Config.ObserveCreated), whatever asked for it — a keyed or
// keyless request, the reconciler finishing a pending create, a command.
// A retry answered 201 from the license its intent already made counts
// nothing: no license was made.
const (
	// Creates counts the licenses made: each commit of a new license row.
	Creates = "licenses.created"
	// Replays counts the requests answered with a stored answer.
	Replays = "idempotency.replayed"
	// Conflicts counts the requests refused because their key was in use
	// (409) or reused for another request (422).
	Conflicts = "idempotency.conflict"
	// Pending counts the 202 answers: an intent whose outcome is unknown.
	Pending = "idempotency.pending"
	// DriftMismatches is a gauge: the mismatches the last drift check
	// found (and left unfixed), written with Set; DriftKind names one
	// kind's.
	DriftMismatches = "drift.mismatches"
)

// DriftKind is the gauge of one kind of drift mismatch (licenses.DriftKinds:
// "site_gone" → "drift.site_gone"), written with Set beside DriftMismatches.
func DriftKind(kind string) string { return "drift." + kind }

// known are the counters that have a slot of their own: Add counts them
// without a lock or an allocation. Any other valid name is counted too,
// under a mutex.
var known = [...]string{Creates, Replays, Conflicts, Pending}

const (
	iCreates = iota
	iReplays
	iConflicts
	iPending
)

// slotOf is the index of a known metric in known, -1 for another.
func slotOf(metric string) int {
	switch metric {
	case Creates:
		return iCreates
	case Replays:
		return iReplays
	case Conflicts:
		return iConflicts
	case Pending:
		return iPending
	}
	return -1
}

// MaxMetricLen is the longest metric name the table holds.
const MaxMetricLen = 64

// ErrInvalidMetric is a metric name that is empty, longer than
// MaxMetricLen, or has a byte other than an ASCII letter, digit, '.', '_'
// or '-'.
var ErrInvalidMetric = errors.New("activity: invalid metric name")

// validMetric reports whether name is a metric name the table takes: a
// name it refused would fail every flush that carried it.
func validMetric(name string) bool {
	if name == "" || len(name) > MaxMetricLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
