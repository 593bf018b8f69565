package licenses

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// A vendor site is claimed once (the vendor_site_claims table, keyed by the
// site's id and its domain, since a vendor may give an id again): by the
// license recorded for it, in that license's transaction, or as discarded,
// before a site nobody will hold is deleted at the vendor. The primary key
// decides a race between the two without a lock: a site a license claimed
// is never deleted by a discard, and a discarded site is never recorded.
// The site of a license since revoked (deleted at the vendor, or about to
// be) is not recorded again for another license either, unless the vendor
// lists it once more when the create looks again: then the vendor still
// has it, and the new license takes the claim over (Reclaim).

// siteClaim is a vendor site's one claim.
type siteClaim struct {
	VendorSiteID string     `gorm:"primaryKey"`
	Domain       string     `gorm:"primaryKey"` // claimDomain of the site's domain
	LicenseID    *string    // nil: discarded
	CreatedAt    time.Time  //
	DeletedAt    *time.Time // a discarded site's delete done; nil: owed
}

// TableName is the table claims live in.
func (siteClaim) TableName() string { return "vendor_site_claims" }

// claimDomain is a domain as claims key it: as a vendor event and a
// license are matched (sameDomain), case aside.
func claimDomain(d string) string { return strings.ToLower(strings.TrimSpace(d)) }

// ErrSiteSpent is a create's site claimed before it could record it: by a
// license since revoked, or as discarded. The vendor has deleted the site
// or is about to; the create looks for the domain's site again.
var ErrSiteSpent = errors.New("the vendor site was recorded for a license since revoked, or discarded")

// claimFor claims the license's site for it in tx: ErrSiteSpent when it
// was claimed before. With reclaim, a claim of a license that no longer
// holds the site (revoked, or gone), or of a discard whose delete was done,
// is taken over instead: the vendor listed the site again.
func claimFor(tx *gorm.DB, lic License, reclaim bool, at time.Time) error {
	c := siteClaim{VendorSiteID: lic.VendorSiteID, Domain: claimDomain(lic.Domain), LicenseID: &lic.ID, CreatedAt: at}
	err := tx.Create(&c).Error
	if err == nil {
		return nil
	}
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		return fmt.Errorf("claim vendor site: %w", err)
	}
	if !reclaim {
		return ErrSiteSpent
	}
	res := tx.Model(&siteClaim{}).
		Where("vendor_site_id = ? AND domain = ?", c.VendorSiteID, c.Domain).
		Where("(license_id IS NULL AND deleted_at IS NOT NULL) OR (license_id IS NOT NULL AND "+
			"NOT EXISTS (SELECT 1 FROM licenses WHERE licenses.id = vendor_site_claims.license_id AND licenses.status <> ?))", StatusRevoked).
		Updates(map[string]any{"license_id": lic.ID, "deleted_at": nil, "created_at": at})
	switch {
	case res.Error != nil:
		return fmt.Errorf("take over a vendor site's claim: %w", res.Error)
	case res.RowsAffected != 1:
		return ErrSiteSpent
	}
	return nil
}

// claimDeleted claims, in tx, a site the vendor deleted as discarded and
// deleted, unless it was claimed before (a license's claim stays). A
// failed INSERT leaves tx usable on both databases.
func claimDeleted(tx *gorm.DB, site Site, at time.Time) error {
	if d := claimDomain(site.Domain); d == "" || len(d) > 253 || strings.IndexFunc(d, func(r rune) bool { return r > 127 }) >= 0 {
		return nil // no domain a license could hold: nothing to claim (a mismatch, logged by the caller's look)
	}
	err := tx.Create(&siteClaim{VendorSiteID: site.ID, Domain: claimDomain(site.Domain), CreatedAt: at, DeletedAt: &at}).Error
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
// taken meanwhile), or found for a domain another license holds. The site
// is first claimed as discarded, so that it is deleted only if no license
// claimed it (the intent's new owner may have recorded it), and is never
// recorded once deleted. A discard whose delete was done before is renewed:
// the vendor lists the site, so it is another under the same id. It runs
// detached from ctx's end, bounded on its own. nil means the site is
// deleted, spared (a license holds it, or held it), or its delete is owed:
// claimed, the vendor failing, DeleteOwedSites deletes it later. An error
// means the claim could not be written: nothing is known of the site here.
// domain is the one the site was asked or looked for (a license's, as
// claims key it).
func (s *Service) DiscardSite(ctx context.Context, site Site, domain string) error {
	return s.discard(ctx, site.ID, domain, true)
}

// FinishDiscard deletes a site found spent if its discard's delete is
// owed (it failed before); a site whose delete was done, or that a license
// claimed, is left as it is: should the vendor list it again, Reclaim
// records it.
func (s *Service) FinishDiscard(ctx context.Context, site Site, domain string) error {
	return s.discard(ctx, site.ID, domain, false)
}

func (s *Service) discard(ctx context.Context, site, domain string, renew bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	ours, err := s.claimDiscarded(ctx, site, domain, renew)
	if err != nil || !ours {
		return err
	}
	_ = s.deleteOwed(ctx, site, claimDomain(domain)) // failed: owed, and DeleteOwedSites retries it
	return nil
}

// deleteOwed deletes a site claimed as discarded at the vendor and notes
// it done.
func (s *Service) deleteOwed(ctx context.Context, site, domain string) error {
	if err := s.cfg.Vendor.DeleteSite(ctx, site); err != nil {
		return fmt.Errorf("delete vendor site: %w", err)
	}
	return s.noteDeleted(ctx, site, domain) // failed: the next sweep looks again, which is safe
}

// noteDeleted notes a discarded site's delete done.
func (s *Service) noteDeleted(ctx context.Context, site, domain string) error {
	err := s.cfg.DB.WithContext(ctx).Model(&siteClaim{}).Where("vendor_site_id = ? AND domain = ? AND license_id IS NULL", site, domain).
		Update("deleted_at", s.now()).Error
	if err != nil {
		return fmt.Errorf("note vendor site deleted: %w", err)
	}
	return nil
}

// DeleteOwedSites deletes at the vendor the discarded sites whose delete
// failed before (the oldest, at most limit of them), the reconciler's
// sweep: deleted counts those done, and err is the first failure. The
// vendor deletes by id alone, so each site is looked up by its domain
// first: one the vendor no longer lists for that domain is gone already
// (perhaps its failed delete went through), and its id may have been given
// to another domain's site since, which must not be deleted.
func (s *Service) DeleteOwedSites(ctx context.Context, limit int) (deleted int, err error) {
	var owed []siteClaim
	if err := s.cfg.DB.WithContext(ctx).Where("deleted_at IS NULL AND license_id IS NULL").
		Order("created_at").Limit(limit).Find(&owed).Error; err != nil {
		return 0, fmt.Errorf("list owed vendor site deletes: %w", err)
	}
	for _, c := range owed {
		site, ferr := s.cfg.Vendor.FindSite(ctx, c.Domain)
		switch {
		case ferr != nil:
			err = cmp.Or(err, fmt.Errorf("find vendor site: %w", ferr))
			continue
		case site == nil || site.ID != c.VendorSiteID:
			ferr = s.noteDeleted(ctx, c.VendorSiteID, c.Domain)
		default:
			ferr = s.deleteOwed(ctx, c.VendorSiteID, c.Domain)
		}
		if ferr != nil {
			err = cmp.Or(err, ferr)
			continue
		}
		deleted++
	}
	return deleted, err
}

// claimDiscarded claims the site as discarded, or finds it claimed so
// already with its delete owed (failed before): false when a license
// claimed it. A discard whose delete was done is renewed (owed again) when
// renew says so, and left otherwise (false).
func (s *Service) claimDiscarded(ctx context.Context, site, domain string, renew bool) (ours bool, err error) {
	c := siteClaim{VendorSiteID: site, Domain: claimDomain(domain), CreatedAt: s.now()}
	err = s.cfg.DB.WithContext(ctx).Create(&c).Error
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		if err != nil {
			return false, fmt.Errorf("claim vendor site as discarded: %w", err)
		}
		return true, nil
	}
	var found siteClaim
	if err := s.cfg.DB.WithContext(ctx).Where("vendor_site_id = ? AND domain = ?", c.VendorSiteID, c.Domain).Take(&found).Error; err != nil {
		return false, fmt.Errorf("read vendor site claim: %w", err)
	}
	switch {
	case found.LicenseID != nil:
		return false, nil
	case found.DeletedAt == nil:
		return true, nil
	case !renew:
		return false, nil
	}
	res := s.cfg.DB.WithContext(ctx).Model(&siteClaim{}).
		Where("vendor_site_id = ? AND domain = ? AND license_id IS NULL AND deleted_at IS NOT NULL", c.VendorSiteID, c.Domain).
		Updates(map[string]any{"deleted_at": nil, "created_at": c.CreatedAt})
	if res.Error != nil {
		return false, fmt.Errorf("renew a vendor site's discard: %w", res.Error)
	}
	return res.RowsAffected == 1, nil // 0: a license took it over meanwhile
}
