package licenses

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// A vendor site is claimed once, ever (the vendor_site_claims table): by
// the license recorded for it, in that license's transaction, or as
// discarded, before a site nobody will hold is deleted at the vendor. The
// primary key decides a race between the two without a lock: a site a
// license claimed is never deleted by a discard, a discarded site is never
// recorded, and the site of a license since revoked (deleted at the vendor,
// or about to be) is never recorded again for another license.

// siteClaim is a vendor site's one claim.
type siteClaim struct {
	VendorSiteID string     `gorm:"primaryKey"`
	LicenseID    *string    // nil: discarded
	CreatedAt    time.Time  //
	DeletedAt    *time.Time // a discarded site's delete done; nil: owed
}

// TableName is the table claims live in.
func (siteClaim) TableName() string { return "vendor_site_claims" }

// ErrSiteSpent is a create's site claimed before it could record it: by a
// license since revoked, or as discarded. The vendor has deleted the site
// or is about to; the create looks for the domain's site again.
var ErrSiteSpent = errors.New("the vendor site was recorded for a license since revoked, or discarded")

// claimFor claims site for the license id in tx: ErrSiteSpent when it was
// claimed before.
func claimFor(tx *gorm.DB, site, id string, at time.Time) error {
	err := tx.Create(&siteClaim{VendorSiteID: site, LicenseID: &id, CreatedAt: at}).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return ErrSiteSpent
	}
	if err != nil {
		return fmt.Errorf("claim vendor site: %w", err)
	}
	return nil
}

// claimDeleted claims, in tx, a site the vendor deleted as discarded and
// deleted, unless it was claimed before (a license's claim stays). A
// failed INSERT leaves tx usable on both databases.
func claimDeleted(tx *gorm.DB, site string, at time.Time) error {
	err := tx.Create(&siteClaim{VendorSiteID: site, CreatedAt: at, DeletedAt: &at}).Error
	if err != nil && !errors.Is(err, gorm.ErrDuplicatedKey) {
		return fmt.Errorf("claim a deleted vendor site: %w", err)
	}
	return nil
}

// discardTimeout bounds a discard run after the work that made the site
// was cut short (its lease, its client): the delete is still owed.
const discardTimeout = 30 * time.Second

// DiscardSite deletes a site nobody will hold: made by a create that then
// could not record it (its intent superseded, its lease lost, its domain
// taken meanwhile, its transaction failed). The site is first claimed as
// discarded, so that it is deleted only if no license claimed it (a
// transaction reported failed may have committed; the intent's new owner
// may have recorded it), and is never recorded once deleted. It runs
// detached from ctx's end, bounded on its own. nil means the site is
// deleted, spared (a license holds it), or its delete is owed: claimed,
// the vendor failing, DeleteOwedSites deletes it later. An error means the
// claim could not be written: nothing is known of the site here.
func (s *Service) DiscardSite(ctx context.Context, site Site) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	ours, err := s.claimDiscarded(ctx, site.ID)
	if err != nil || !ours {
		return err
	}
	_ = s.deleteOwed(ctx, site.ID) // failed: owed, and DeleteOwedSites retries it
	return nil
}

// deleteOwed deletes a site claimed as discarded at the vendor and notes
// it done.
func (s *Service) deleteOwed(ctx context.Context, site string) error {
	if err := s.cfg.Vendor.DeleteSite(ctx, site); err != nil {
		return fmt.Errorf("delete vendor site: %w", err)
	}
	err := s.cfg.DB.WithContext(ctx).Model(&siteClaim{}).Where("vendor_site_id = ? AND license_id IS NULL", site).
		Update("deleted_at", s.now()).Error
	if err != nil { // deleted; the next sweep deletes it again, which is safe
		return fmt.Errorf("note vendor site deleted: %w", err)
	}
	return nil
}

// DeleteOwedSites deletes at the vendor the discarded sites whose delete
// failed before (the oldest, at most limit of them), the reconciler's
// sweep: deleted counts those done, and err is the first failure.
func (s *Service) DeleteOwedSites(ctx context.Context, limit int) (deleted int, err error) {
	var owed []string
	if err := s.cfg.DB.WithContext(ctx).Model(&siteClaim{}).Where("deleted_at IS NULL AND license_id IS NULL").
		Order("created_at").Limit(limit).Pluck("vendor_site_id", &owed).Error; err != nil {
		return 0, fmt.Errorf("list owed vendor site deletes: %w", err)
	}
	for _, site := range owed {
		if derr := s.deleteOwed(ctx, site); derr != nil {
			err = cmp.Or(err, derr)
			continue
		}
		deleted++
	}
	return deleted, err
}

// claimDiscarded claims the site as discarded, or finds it claimed so
// already (its delete owed, perhaps failed before): false when a license
// claimed it.
func (s *Service) claimDiscarded(ctx context.Context, site string) (ours bool, err error) {
	err = s.cfg.DB.WithContext(ctx).Create(&siteClaim{VendorSiteID: site, CreatedAt: s.now()}).Error
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		if err != nil {
			return false, fmt.Errorf("claim vendor site as discarded: %w", err)
		}
		return true, nil
	}
	var c siteClaim
	if err := s.cfg.DB.WithContext(ctx).Where("vendor_site_id = ?", site).Take(&c).Error; err != nil {
		return false, fmt.Errorf("read vendor site claim: %w", err)
	}
	return c.LicenseID == nil, nil
}
