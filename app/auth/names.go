package auth

import (
	"context"
	"fmt"
	"slices"
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
// when nothing is. Control and format characters (Cc, Cf) are refused: NUL,
// bidirectional overrides such as U+202E, zero-width ones such as U+200B.
func consumerNameProblem(name string) string {
	switch {
	case name == "":
		return "The consumer field is required."
	case !utf8.ValidString(name):
		return "The consumer field must be valid UTF-8."
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.In(r, unicode.Cc, unicode.Cf) }):
		return "The consumer field must not contain control characters, bidirectional controls or zero-width characters."
	case utf8.RuneCountInString(name) > maxConsumerName:
		return fmt.Sprintf("The consumer field must not be greater than %d characters.", maxConsumerName)
	}
	return ""
}

// foldKey is what two names that differ only in case share: full Unicode
// case folding ("Straße" and "STRASSE" fold alike), in normal form C.
func foldKey(name string) string {
	return norm.NFC.String(cases.Fold().String(norm.NFC.String(name)))
}

// caseTwin returns the name of an existing consumer that differs from name
// only in case, "" when there is none. Consumers are few: it reads them all.
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

// nameScripts returns the scripts of name's characters, each once, in the
// order they first appear, leaving out Common and Inherited (digits,
// spaces, punctuation, combining marks) as UTS #39's restriction levels do.
func nameScripts(name string) []string {
	var found []string
	for _, r := range name {
		script := scriptOf(r)
		if script != "Common" && script != "Inherited" && !slices.Contains(found, script) {
			found = append(found, script)
		}
	}
	return found
}

// scriptOf is the script r belongs to: every assigned character is in
// exactly one of unicode.Scripts; an unassigned one is "Unknown".
func scriptOf(r rune) string {
	if unicode.Is(unicode.Latin, r) {
		return "Latin"
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return "Unknown"
}

// scriptMixes are the mixes of scripts a name may hold, as UTS #39's
// "highly restrictive" level allows them: Latin with the scripts that
// Japanese, Chinese and Korean write together. Any other mix (Cyrillic
// "а" among Latin "cme", Greek among Latin) is how a name is made to look
// like another.
var scriptMixes = [][]string{
	{"Latin", "Han", "Hiragana", "Katakana"}, // Japanese
	{"Latin", "Han", "Bopomofo"},             // Chinese
	{"Latin", "Han", "Hangul"},               // Korean
}

// mixedScriptsProblem says why a new consumer name is refused for mixing
// scripts, "" when it holds one script or one of scriptMixes.
func mixedScriptsProblem(name string) string {
	scripts := nameScripts(name)
	if len(scripts) < 2 {
		return ""
	}
	for _, mix := range scriptMixes {
		outside := func(script string) bool { return !slices.Contains(mix, script) }
		if !slices.ContainsFunc(scripts, outside) {
			return ""
		}
	}
	return fmt.Sprintf("The consumer field must not mix letters of different scripts (it mixes %s), as a name made to "+
		"look like another does. Write it in one script; Latin may go with Han, Hiragana and Katakana, with Han and "+
		"Bopomofo, or with Han and Hangul.", sentence(scripts))
}
