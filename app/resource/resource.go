// Package resource holds the API's JSON representations: what a body says
// of a thing, field by field, and the one time format every body uses.
// app/http answers with them and app/console prints them for --json, so an
// operator's script reads the same object from either. It knows no echo,
// GORM, database or configuration: only the types it presents, and the
// standard library. A list (New…s) keeps its order and is never nil, so that
// none is an empty JSON array.
package resource

import (
	"time"

	"github.com/licensor-api/licensor/app/events"
)

// TimeOrNil is events.Time(*t), nil (JSON null) for no time.
func TimeOrNil(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := events.Time(*t)
	return &s
}

// TimeOf is a time of a body (an events.TimeLayout string, or a pointer to one,
// nil for null) or a time.Time (or a pointer to one) as a time.Time; the
// zero time for none (nil, "") and for text that is no body's time.
func TimeOf(t any) time.Time {
	switch t := t.(type) {
	case string:
		at, _ := time.Parse(events.TimeLayout, t)
		return at
	case *string:
		if t != nil {
			return TimeOf(*t)
		}
	case time.Time:
		return t
	case *time.Time:
		if t != nil {
			return *t
		}
	}
	return time.Time{}
}

// FormatTime is TimeOf(t) as an operator's view shows it, in layout, UTC;
// "" for none. The command line's tables and the console's pages render
// every time through it.
func FormatTime(t any, layout string) string {
	at := TimeOf(t)
	if at.IsZero() {
		return ""
	}
	return at.UTC().Format(layout)
}

func list[T, R any](xs []T, present func(T) R) []R {
	out := make([]R, 0, len(xs))
	for _, x := range xs {
		out = append(out, present(x))
	}
	return out
}

// StringOrNil is s, nil (JSON null) when it is empty.
func StringOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
