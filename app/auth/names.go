package auth

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// maxConsumerName is the longest consumer name, in characters: the MySQL
// column's VARCHAR(191).
const maxConsumerName = 191

// NormalizeConsumerName returns a consumer name as it is stored and looked
// up: trimmed and in Unicode normal form C, so that a decomposed spelling
// ("Mu\u0308ller") names the same consumer as the composed one ("Müller").
// Invalid UTF-8 is returned as it is, for validation to refuse.
func NormalizeConsumerName(name string) string {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) {
		return name
	}
	return norm.NFC.String(name)
}

// consumerNameProblem says what is wrong with a normalised consumer name, ""
// when nothing is: it must be valid UTF-8, not empty, at most 191
// characters, and hold no control or format character (unicode.Cc, Cf: NUL,
// bidirectional overrides such as U+202E, zero-width characters such as
// U+200B).
func consumerNameProblem(name string) string {
	switch {
	case name == "":
		return "The consumer field is required."
	case !utf8.ValidString(name):
		return "The consumer field must be valid UTF-8."
	case hasInvisible(name):
		return "The consumer field must not contain control characters, bidirectional controls or zero-width characters."
	case utf8.RuneCountInString(name) > maxConsumerName:
		return fmt.Sprintf("The consumer field must not be greater than %d characters.", maxConsumerName)
	}
	return ""
}

// hasInvisible reports whether s holds a control (Cc) or format (Cf)
// character.
func hasInvisible(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.In(r, unicode.Cc, unicode.Cf)
	})
}

// foldKey is what two names that differ only in case share: full Unicode
// case folding ("Straße" and "STRASSE" fold alike), in normal form C.
func foldKey(name string) string {
	return norm.NFC.String(cases.Fold().String(norm.NFC.String(name)))
}

// caseTwin returns the name of an existing consumer that differs from name
// only in case, "" when there is none. Consumers are few; it reads their
// names.
func (s *Service) caseTwin(ctx context.Context, name string) (string, error) {
	var names []string
	if err := s.db.WithContext(ctx).Model(&Consumer{}).Pluck("name", &names).Error; err != nil {
		return "", fmt.Errorf("read consumer names: %w", err)
	}
	key := foldKey(name)
	for _, existing := range names {
		if existing != name && foldKey(existing) == key {
			return existing, nil
		}
	}
	return "", nil
}
