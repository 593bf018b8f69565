package activity

import (
	"errors"
	"slices"
)

// The metrics licensor counts. A guard outcome (what Guard's Observe is told)
// counts as ObserveIdempotency maps it:
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
// Creates are not counted from the guard: "executed" is also told for a
// completion whose settle then failed, and not for a create the reconciler
// finishes, nor a keyless one. They are counted at the commit of a new license
// row (licenses.Config.ObserveCreated), whatever asked for it; a retry
// answered 201 from the license its intent already made counts nothing.
const (
	Creates   = "licenses.created"     // each commit of a new license row
	Replays   = "idempotency.replayed" // requests answered with a stored answer
	Conflicts = "idempotency.conflict" // 409 (key in use) and 422 (key reused)
	Pending   = "idempotency.pending"  // 202s: intents whose outcome is unknown
	// DriftMismatches is a gauge, written with Set: the mismatches the last
	// drift check left unfixed; DriftKind names one kind's.
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

func slotOf(metric string) int { return slices.Index(known[:], metric) }

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
