package web

import "testing"

func TestShownURLHidesWhatMayBeASecret(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example/licensor":                 "https://hooks.example/licensor",
		"https://hooks.example/in?token=s3cret":          "https://hooks.example/in (query or credentials hidden)",
		"https://user:pass@hooks.example:8443/in":        "https://hooks.example:8443/in (query or credentials hidden)",
		"https://hooks.example/in?token=s3cret#fragment": "https://hooks.example/in (query or credentials hidden)",
		"http://[::1]:9/%zz":                             "(an address that cannot be shown)",
	} {
		if got := shownURL(raw); got != want {
			t.Errorf("shownURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
