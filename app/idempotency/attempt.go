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
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/fault"
)

// Attempt is one attempt of the reconciler at an intent, as its
// intent.attempted audit event's reason records it. The event commits with
// the attempt's change to the record, or not at all; a pass that tried
// nothing writes none.
type Attempt struct {
	// Number is the record's attempts once this one is counted (the first
	// request is attempt 1). A waiting attempt is not counted: the next
	// attempt has its number too.
	Number int
	Result string // completed, waiting, retry, failed or superseded
	// Class says why a retry or a failure did not finish (errorClass), never
	// an error's text, which may carry a vendor's body, a license key or a
	// token. Empty for the other results.
	Class string
	// Next is when the reconciler works the intent again; nil for none (one
	// failed for good waits for an operator).
	Next *time.Time
}

// reason is the attempt as its audit event's reason holds it:
//
//	attempt 3: completed
//	attempt 2: waiting, next at 2026-12-01T10:01:00.000000Z
//	attempt 4: retry (vendor_unavailable), next at 2026-12-01T10:00:30.000000Z
//	attempt 11: failed (vendor_uncertain), next at 2026-12-01T11:00:00.000000Z
//	attempt 2: failed (domain_taken)
//	attempt 2: superseded
func (a Attempt) reason() string {
	var b strings.Builder
	fmt.Fprintf(&b, "attempt %d: %s", a.Number, a.Result)
	if a.Class != "" {
		fmt.Fprintf(&b, " (%s)", a.Class)
	}
	if a.Next != nil {
		b.WriteString(", next at " + a.Next.UTC().Format(events.TimeLayout))
	}
	return b.String()
}

var attemptReason = regexp.MustCompile(`^attempt ([1-9][0-9]{0,8}): ([a-z]+)(?: \(([a-z][a-z0-9_]*)\))?(?:, next at (\S+))?$`)

var errNotAnAttempt = errors.New("not the reason of an intent.attempted event")

// ParseAttempt reads an intent.attempted event's reason back into its
// Attempt (for an operator's page, which shows its fields apart).
func ParseAttempt(reason string) (Attempt, error) {
	m := attemptReason.FindStringSubmatch(reason)
	if m == nil {
		return Attempt{}, errNotAnAttempt
	}
	n, _ := strconv.Atoi(m[1]) // nine digits at most: it fits
	a := Attempt{Number: n, Result: m[2], Class: m[3]}
	if m[4] != "" {
		next, err := time.Parse(events.TimeLayout, m[4])
		if err != nil {
			return Attempt{}, errNotAnAttempt
		}
		a.Next = &next
	}
	return a, nil
}

// recordAttempt writes a in tx, the transaction of the change it made to r.
func recordAttempt(tx *gorm.DB, r *Record, a *Attempt, now time.Time) error {
	return audit.Record(tx, audit.Reconciler(), audit.Change{Event: audit.IntentAttempted, SubjectType: audit.SubjectIntent,
		SubjectID: r.ref(), Reason: a.reason()}, now)
}

// Classes of a failed attempt whose error names none of its own.
const (
	classDatabaseUnavailable = "database_unavailable"
	classTimeout             = "timeout"       // the work budget ran out
	classCanceled            = "canceled"      // the process is stopping
	classCannotFinish        = "cannot_finish" // ErrAbandon, with no class of its cause's
	classPanic               = "panic"         // the Resume panicked
	classError               = "error"
)

// errorClass is err's class for the attempt history: the application error
// code in its chain (fault.Code), fault.ClassInvalidInput for field errors,
// else one of the class constants. A code that is not a snake_case word of
// at most 40 characters is classError, so no text an error carries (a
// vendor's body, a key, a token) ever reaches the trail.
func errorClass(err error) string {
	if class := fault.Code(err); className.MatchString(class) {
		return class
	}
	var fields *fault.Fields
	switch {
	case errors.As(err, &fields):
		return fault.ClassInvalidInput
	case errors.Is(err, database.ErrUnavailable):
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

var className = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
