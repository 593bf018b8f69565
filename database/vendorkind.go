package database

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/dbtime"
)

// Vendor drivers a database can be bound to (VENDOR_DRIVER).
const (
	VendorFake = "fake"
	VendorHTTP = "http"
)

// VendorKind is the vendor a database works with: the row of vendor_kind.
type VendorKind struct {
	Driver string // VendorFake or VendorHTTP
	Host   string // VENDOR_URL's host (and port) for http; never a token or a path
	// HTTPUntil is when the database moved from the http driver to the
	// fake (zero if it never did): the fake leaves alone what the http
	// driver made before then.
	HTTPUntil time.Time
}

// VendorBinding is what BindVendor found and did.
type VendorBinding struct {
	VendorKind            // the kind now recorded
	Recorded   bool       // the database had no kind: this is the first
	Changed    bool       // --vendor-change moved it from Previous
	Moved      bool       // same driver, another host: this process recorded the move
	Previous   VendorKind // the kind before a change or a move
}

// ErrVendorKind is BindVendor's refusal of a driver other than the one the
// database works with; its message names both.
var ErrVendorKind = errors.New("the database works with another vendor driver")

type vendorKindRow struct {
	ID         int
	Driver     string
	Host       string
	HTTPUntil  *time.Time
	RecordedAt time.Time
	UpdatedAt  time.Time
}

func (vendorKindRow) TableName() string { return "vendor_kind" }

// BindVendor compares want with the vendor the database works with. The
// first call records want. Another driver is refused (ErrVendorKind) unless
// change says the operator moves the database to it, in which case the new
// driver is recorded. Another host of the same driver is the vendor having
// moved: it is recorded, and Moved is true for the one process whose update
// recorded it, so the move is logged once.
func BindVendor(ctx context.Context, db *gorm.DB, want VendorKind, change bool, now time.Time) (VendorBinding, error) {
	now = dbtime.Stamp(now)
	for attempt := 0; ; attempt++ {
		var row vendorKindRow
		err := db.WithContext(ctx).Where("id = 1").Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			row = vendorKindRow{ID: 1, Driver: want.Driver, Host: want.Host, RecordedAt: now, UpdatedAt: now}
			// Replicas starting together race to record it: a conflict (a
			// deadlock, or a Galera certification failure) is retried, and
			// the loser then finds the winner's row and compares with it.
			err = RetryOnConflict(ctx, func() *gorm.DB { return db.WithContext(ctx).Create(&row) }).Error
			if errors.Is(err, gorm.ErrDuplicatedKey) && attempt == 0 {
				continue // another process recorded its kind first: compare with it
			}
			if err != nil {
				return VendorBinding{}, fmt.Errorf("record the vendor driver: %w", err)
			}
			return VendorBinding{VendorKind: want, Recorded: true}, nil
		}
		if err != nil {
			return VendorBinding{}, fmt.Errorf("read the vendor driver: %w", err)
		}
		return bindRecorded(ctx, db, row, want, change, now)
	}
}

// bindRecorded is BindVendor on a database that has a kind already.
func bindRecorded(ctx context.Context, db *gorm.DB, row vendorKindRow, want VendorKind, change bool, now time.Time) (VendorBinding, error) {
	had := VendorKind{Driver: row.Driver, Host: row.Host}
	if row.HTTPUntil != nil {
		had.HTTPUntil = row.HTTPUntil.UTC()
	}
	b := VendorBinding{VendorKind: had, Previous: had}
	switch {
	case had.Driver == want.Driver && had.Host == want.Host:
		return b, nil
	case had.Driver != want.Driver && !change:
		return b, fmt.Errorf("%w: it was recorded with VENDOR_DRIVER=%s%s, and this process has VENDOR_DRIVER=%s%s; refused, nothing done. "+
			"Start it with the server's vendor settings (VENDOR_DRIVER, VENDOR_URL, VENDOR_TOKEN), or, to move the database "+
			"to the %s driver for good, pass --vendor-change", ErrVendorKind, had.Driver, hostNote(had.Host), want.Driver, hostNote(want.Host), want.Driver)
	}
	set := map[string]any{"driver": want.Driver, "host": want.Host, "updated_at": now}
	next := VendorKind{Driver: want.Driver, Host: want.Host, HTTPUntil: had.HTTPUntil}
	if had.Driver == VendorHTTP && want.Driver == VendorFake {
		set["http_until"], next.HTTPUntil = now, now
	}
	res := RetryOnConflict(ctx, func() *gorm.DB {
		return db.WithContext(ctx).Table("vendor_kind").Where("id = 1 AND driver = ? AND host = ?", had.Driver, had.Host).Updates(set)
	})
	if res.Error != nil {
		return b, fmt.Errorf("record the vendor driver: %w", res.Error)
	}
	b.VendorKind = next
	b.Changed = had.Driver != want.Driver
	b.Moved = !b.Changed && res.RowsAffected == 1 // another process may have recorded the same move
	return b, nil
}

func hostNote(host string) string {
	if host == "" {
		return ""
	}
	return " (VENDOR_URL host " + host + ")"
}
