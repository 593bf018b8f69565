package audit

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/licensor-api/licensor/internal/fault"
)

// MaxReason is the longest reason a change may be given, in characters.
const MaxReason = 500

// ValidationError says what is wrong with a reason, as the field reason: a
// *fault.Fields. The name stays while app/console and app/web name it.
type ValidationError = fault.Fields

// Reason returns the reason a change is given, trimmed: required, valid
// UTF-8, 1 to MaxReason characters. Anything else is a *ValidationError on
// the field reason, in Laravel's words.
func Reason(s string) (string, error) {
	msg := ""
	switch s = strings.TrimSpace(s); {
	case !utf8.ValidString(s):
		msg = "The reason field must be valid UTF-8."
	case s == "":
		msg = "The reason field is required."
	case utf8.RuneCountInString(s) > MaxReason:
		msg = "The reason field must not be greater than " + strconv.Itoa(MaxReason) + " characters."
	default:
		return s, nil
	}
	return "", &ValidationError{Fields: map[string][]string{"reason": {msg}}}
}
