package tests

import (
	"testing"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/app/vendorproto"
)

// The domain names the vendor's events and site statuses itself (package
// licenses imports nothing of the wire protocol): its names must be the
// wire's, or a webhook's type would go unrecognised, and the drift check,
// which reads a vendor site's status with the license statuses, would
// misjudge every site.
func TestDomainNamesAreTheWires(t *testing.T) {
	for _, tt := range []struct{ domain, wire string }{
		{licenses.SiteSuspended, vendorproto.EventSiteSuspended},
		{licenses.SiteReactivated, vendorproto.EventSiteReactivated},
		{licenses.SiteDeleted, vendorproto.EventSiteDeleted},
		{licenses.SiteKeyRotated, vendorproto.EventSiteKeyRotated},
		{licenses.StatusActive, vendorproto.StatusActive},
		{licenses.StatusSuspended, vendorproto.StatusSuspended},
	} {
		if tt.domain != tt.wire {
			t.Errorf("licenses says %q where the vendor protocol says %q", tt.domain, tt.wire)
		}
	}
}
