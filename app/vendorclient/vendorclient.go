package vendorclient

import (
	"fmt"
	"log/slog"

	"github.com/licensor-api/licensor/app/licenses"
	"github.com/licensor-api/licensor/config"
)

// New builds the driver cfg.Driver names: "fake" (the default) or "http".
// An unknown name, or "http" without VENDOR_URL or VENDOR_TOKEN, is an error
// that names the variable. opts set the http driver's clock and hooks (see
// NewHTTP); the fake ignores them.
func New(cfg config.Vendor, log *slog.Logger, opts ...Option) (licenses.Vendor, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Driver {
	case "", "fake":
		log.Warn("vendor driver is the in-memory fake: sites vanish with the process; for demos only, set VENDOR_DRIVER=http for real use")
		return NewFake(), nil
	case "http":
		d, err := NewHTTP(cfg, log, opts...)
		if err != nil {
			return nil, err // not a nil *HTTPDriver inside a non-nil interface
		}
		return d, nil
	}
	return nil, fmt.Errorf("VENDOR_DRIVER %q is not fake or http", cfg.Driver)
}
