package licenses

import (
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
	VendorSiteID string  `gorm:"primaryKey"`
	LicenseID    *string // nil: discarded
	CreatedAt    time.Time
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

// discardTimeout bounds a discard run after the work that made the site
// was cut short (its lease, its client): the delete is still owed.
const discardTimeout = 30 * time.Second

// DiscardSite deletes a site nobody will hold: made by a create that then
// could not record it (its intent superseded, its lease lost, its domain
// taken meanwhile, its transaction failed). The site is first claimed as
// discarded, so that it is deleted only if no license claimed it (a
// transaction reported failed may have committed; the intent's new owner
// may have recorded it), and is never recorded once deleted. deleted says
// whether it was. It runs detached from ctx's end, bounded on its own.
// Should the delete fail, the site stays claimed as discarded: the drift
// check reports it as an orphan, and its fix deletes it.
func (s *Service) DiscardSite(ctx context.Context, site Site) (deleted bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	if claimed, err := s.claimDiscarded(ctx, site.ID); err != nil || !claimed {
		return false, err
	}
	if err := s.cfg.Vendor.DeleteSite(ctx, site.ID); err != nil {
		return false, fmt.Errorf("delete vendor site: %w", err)
	}
	return true, nil
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
