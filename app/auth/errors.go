package auth

import (
	"errors"
	"maps"
	"slices"
	"strings"
)

// Errors the service returns; the HTTP layer maps them to statuses.
var (
	// ErrUnauthenticated covers every reason a token is refused: malformed,
	// forged, expired, revoked or unknown. The reason is never told apart to
	// the caller.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrTokenNotFound means no token has that id.
	ErrTokenNotFound = errors.New("token not found")
)

// ValidationError lists what is wrong with the input, field by field.
type ValidationError struct {
	Fields map[string][]string
}

// ValidationError implements app/http's fieldErrors.
var _ interface{ FieldErrors() map[string][]string } = (*ValidationError)(nil)

func (e *ValidationError) Error() string {
	var msgs []string
	for _, field := range slices.Sorted(maps.Keys(e.Fields)) {
		msgs = append(msgs, e.Fields[field]...)
	}
	return "invalid input: " + strings.Join(msgs, " ")
}

// FieldErrors returns the errors per field.
func (e *ValidationError) FieldErrors() map[string][]string { return e.Fields }

func (e *ValidationError) add(field, msg string) {
	if e.Fields == nil {
		e.Fields = map[string][]string{}
	}
	e.Fields[field] = append(e.Fields[field], msg)
}

// orNil returns e when it holds errors, else nil.
func (e *ValidationError) orNil() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}
