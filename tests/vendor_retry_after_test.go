package tests

import (
	"net/http"
	"testing"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A vendor 503 passes its Retry-After on to the client's 503
// vendor_unavailable (capped at five minutes); without one the answer says 1.
func TestVendor503RetryAfterReachesTheClient(t *testing.T) {
	cases := []struct{ name, vendor, want string }{
		{"the vendor's seconds", "30", "30"},
		{"none given", "", "1"},
		{"capped at five minutes", "86400", "300"},
	}
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		a := newApp(t, db)
		acme := a.consumer("acme")
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rep := reply{status: http.StatusServiceUnavailable, body: `{"message":"Down for maintenance."}`}
				if tc.vendor != "" {
					rep.header = map[string]string{"Retry-After": tc.vendor}
				}
				a.vendor.script("GET", rep) // the create's look for the domain's site
				r := a.do(http.MethodPost, "/api/licenses", acmeBody, acme...)
				r.wantError(http.StatusServiceUnavailable, "vendor_unavailable")
				if got := r.Header().Get("Retry-After"); got != tc.want {
					t.Errorf("Retry-After = %q, want %q (the vendor said %q)", got, tc.want, tc.vendor)
				}
			})
		}
	})
}
