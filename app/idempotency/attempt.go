package idempotency

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
)

// Attempt is one attempt of the reconciler at an intent, as its
// intent.attempted audit event records it: the event's reason is
// Attempt.Reason, and ParseAttempt reads it back. The event is written in
// the transaction of the change the attempt made to the record (its
// completion, postponement, failure or supersession), so that an attempt
// is in the trail if and only if that change committed. A pass that tried
// nothing (the record's request sealed under a key this replica does not
// hold, an operation nobody resumes, a record that never started and is
// abandoned) or whose claim was lost writes none.
type Attempt struct {
	// Number is the record's attempts once this one is counted (the first
	// request is attempt 1). A waiting attempt is not counted: the next
	// attempt has its number too.
	Number int
	// Result is what came of it: ResultCompleted, ResultWaiting,
	// ResultRetry, ResultFailed or ResultSuperseded.
	Result string
	// Class says why a retry or a failure did not finish: a snake_case
	// class such as vendor_unavailable (see errorClass), never an error's
	// text, which may carry a vendor's body, a license key or a token.
	// Empty for the other results.
	Class string
	// Next is when the reconciler works the intent again: nil for none (a
	// completed or superseded intent, or one failed for good, which waits
	// for an operator).
	Next *time.Time
}

// attemptTimeLayout is how Reason writes Next: the API's time format.
const attemptTimeLayout = "2006-01-02T15:04:05.000000Z"

// Reason is the attempt as its audit event's reason holds it:
//
//	attempt 3: completed
//	attempt 2: waiting, next at 2026-12-01T10:01:00.000000Z
//	attempt 4: retry (vendor_unavailable), next at 2026-12-01T10:00:30.000000Z
//	attempt 11: failed (vendor_uncertain), next at 2026-12-01T11:00:00.000000Z
//	attempt 2: failed (domain_taken)
//	attempt 2: superseded
func (a Attempt) Reason() string {
	var b strings.Builder
	fmt.Fprintf(&b, "attempt %d: %s", a.Number, a.Result)
	if a.Class != "" {
		fmt.Fprintf(&b, " (%s)", a.Class)
	}
	if a.Next != nil {
		b.WriteString(", next at " + a.Next.UTC().Format(attemptTimeLayout))
	}
	return b.String()
}

// attemptReason is the grammar of Reason: number, result, class, next.
var attemptReason = regexp.MustCompile(`^attempt ([1-9][0-9]{0,8}): ([a-z]+)(?: \(([a-z][a-z0-9_]*)\))?(?:, next at (\S+))?$`)

// errNotAnAttempt is ParseAttempt's answer to a reason Attempt.Reason did
// not write (the reason of another event).
var errNotAnAttempt = errors.New("not the reason of an intent.attempted event")

// ParseAttempt reads an intent.attempted event's reason back into the
// Attempt it records (for an operator's page, which shows its fields
// apart); errNotAnAttempt for any other text.
func ParseAttempt(reason string) (Attempt, error) {
	m := attemptReason.FindStringSubmatch(reason)
	if m == nil {
		return Attempt{}, errNotAnAttempt
	}
	n, _ := strconv.Atoi(m[1]) // nine digits at most: it fits
	a := Attempt{Number: n, Result: m[2], Class: m[3]}
	if m[4] != "" {
		next, err := time.Parse(attemptTimeLayout, m[4])
		if err != nil {
			return Attempt{}, errNotAnAttempt
		}
		a.Next = &next
	}
	return a, nil
}

// recordAttempt writes a, the reconciler's attempt at r, in tx: the
// transaction of the change the attempt made to r.
func recordAttempt(tx *gorm.DB, r *Record, a *Attempt, now time.Time) error {
	return audit.Record(tx, audit.Reconciler(), audit.Change{Event: audit.IntentAttempted, SubjectType: audit.SubjectIntent,
		SubjectID: r.Ref(), Reason: a.Reason()}, now)
}

// Classes of a failed attempt that this package tells by itself, when the
// error names none of its own (errorClass).
const (
	classDatabaseUnavailable = "database_unavailable" // the database could not serve (database.UnavailableError)
	classTimeout             = "timeout"              // the attempt's work budget ran out
	classCanceled            = "canceled"             // the attempt was stopped (the process is stopping)
	classCannotFinish        = "cannot_finish"        // ErrAbandon, with no class of its cause's
	classPanic               = "panic"                // the Resume panicked
	classError               = "error"                // anything else
)

// errorClass says what class of failure err is, for an intent's attempt
// history: the class the first error of its chain that has a method
// ErrorClass() string names (a vendor's unavailability, a refusal, an
// invalid stored request: the domain's errors name theirs), else one this
// package tells (the Class constants). A class is a snake_case word of at
// most 40 characters: one that is not is classError, so no text an error
// carries (a vendor's body, a key, a token) ever reaches the trail.
func errorClass(err error) string {
	var c interface{ ErrorClass() string }
	if errors.As(err, &c) {
		if class := c.ErrorClass(); className.MatchString(class) {
			return class
		}
	}
	var u interface{ Unavailable() bool }
	switch {
	case errors.As(err, &u) && u.Unavailable():
		return classDatabaseUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return classTimeout
	case errors.Is(err, context.Canceled):
		return classCanceled
	case errors.Is(err, ErrAbandon):
		return classCannotFinish
	}
	return classError
}

// className is what a class may be.
var className = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// classedError is an error of this package's that names its class.
type classedError struct {
	class string
	err   error
}

func (e *classedError) Error() string { return e.err.Error() }

// Unwrap exposes the cause.
func (e *classedError) Unwrap() error { return e.err }

// ErrorClass names the class (see errorClass).
func (e *classedError) ErrorClass() string { return e.class }
