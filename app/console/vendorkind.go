package console

import (
	"context"
	"errors"
	"net/url"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/database"
)

const vendorChangeUsage = "record this process's VENDOR_DRIVER as the database's vendor, replacing the one recorded " +
	"(moving a database to another vendor for good); without it another driver is refused"

// bindVendor records the vendor driver as the database's the first time, and
// refuses another one afterwards unless change (database.BindVendor). Once the
// database moved from the http driver to the fake, the fake's reconciler
// leaves alone the intents made before: the fake cannot know their outcome.
func (a *App) bindVendor(ctx context.Context, change bool) error {
	want := database.VendorKind{Driver: a.Config.Vendor.Driver, Host: vendorHost(a.Config.Vendor.URL)}
	if want.Driver != database.VendorHTTP {
		want.Host = "" // the fake has no address
	}
	b, err := database.BindVendor(ctx, a.DB, want, change, a.now())
	if err != nil {
		return errors.Join(err, a.Close())
	}
	switch {
	case b.Recorded:
		a.Log.Info("vendor driver recorded: the database works with it from now on", "vendor_driver", b.Driver, "vendor_host", b.Host)
	case b.Changed:
		a.Log.Warn("vendor driver changed (--vendor-change): the database works with it from now on",
			"from", b.Previous.Driver, "from_host", b.Previous.Host, "to", b.Driver, "to_host", b.Host)
	case b.Moved:
		a.Log.Warn("vendor moved: VENDOR_URL names another host than the database recorded; the new one is recorded",
			"vendor_driver", b.Driver, "from_host", b.Previous.Host, "to_host", b.Host)
	}
	a.VendorKind = b.VendorKind
	if b.Driver == database.VendorFake && !b.HTTPUntil.IsZero() {
		cfg := a.reconcilerCfg
		cfg.LeaveBefore = b.HTTPUntil
		a.Reconciler = idempotency.NewReconciler(cfg)
	}
	return nil
}

// madeByHTTP tells whether the database holds what the http driver made
// while this process runs the fake: the fake must not judge it.
func (a *App) madeByHTTP() bool {
	return a.VendorKind.Driver == database.VendorFake && !a.VendorKind.HTTPUntil.IsZero()
}

// vendorHost is VENDOR_URL's host and port: what a log line and the
// database may show of it (never its user info, where a token could be).
func vendorHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}
