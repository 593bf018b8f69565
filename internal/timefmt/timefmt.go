// Package timefmt renders a time that may be missing (a nullable column's
// *time.Time, or a zero time.Time) for a page or a table.
package timefmt

import "time"

// OrNone is *t in layout, in UTC; none when there is no time: t is nil, or
// the zero time, which no row holds.
func OrNone(t *time.Time, layout, none string) string {
	if t == nil || t.IsZero() {
		return none
	}
	return t.UTC().Format(layout)
}
