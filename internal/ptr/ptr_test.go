package ptr

import "testing"

func TestPointers(t *testing.T) {
	if got := Deref[string](nil); got != "" {
		t.Errorf("Deref(nil) = %q, want the zero value", got)
	}
	if got := Deref(To("a")); got != "a" {
		t.Errorf("Deref(To(a)) = %q", got)
	}
	if OrNil("") != nil || OrNil(0) != nil {
		t.Error("OrNil of a zero value is not nil")
	}
	if p := OrNil("a"); p == nil || *p != "a" {
		t.Errorf("OrNil(a) = %v", p)
	}
}
