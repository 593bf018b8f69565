package web

import "testing"

// The endpoint page's pager links to the newer and older pages that exist,
// keeping the status filter.
func TestEndpointPageLinks(t *testing.T) {
	const id = "01JDQ8Z7F0A2B4C6D8E0G2H4J6"
	base := Prefix + "/webhooks/endpoints/" + id + "?"
	for _, tc := range []struct {
		page       int
		status     string
		total      int64
		prev, next string
	}{
		{1, "", 0, "", ""},
		{1, "", endpointDeliveriesPerPage, "", ""},
		{1, "", endpointDeliveriesPerPage + 1, "", base + "page=2"},
		{2, "failed", 3 * endpointDeliveriesPerPage, base + "page=1&status=failed", base + "page=3&status=failed"},
		{3, "", 3 * endpointDeliveriesPerPage, base + "page=2", ""},
	} {
		p := deliveriesPager(id, tc.status, tc.page, tc.total)
		if p.Prev != tc.prev || p.Next != tc.next {
			t.Errorf("page %d of %d (%q): prev %q next %q, want %q and %q", tc.page, tc.total, tc.status, p.Prev, p.Next, tc.prev, tc.next)
		}
	}
}

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
