// Package ptr moves between a value and a pointer to it, for the nullable
// columns and the optional JSON fields that hold a *T.
package ptr

// To is a pointer to a copy of v.
func To[T any](v T) *T { return &v }

// Deref is *p, T's zero value when p is nil.
func Deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// OrNil is a pointer to a copy of v, nil when v is T's zero value: an
// empty string is a NULL column, a null JSON field.
func OrNil[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
