package licenses

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// SiteLister pages through every site the vendor holds, in a stable order
// (the vendor protocol's GET /sites?page=&per_page=). The http and fake
// drivers satisfy it.
type SiteLister interface {
	ListSites(ctx context.Context, page, perPage int) (sites []Site, total int, err error)
}

// Kinds of drift between the vendor's sites and the licenses.
const (
	DriftSiteGone    = "site_gone"      // an active or suspended license whose site the vendor no longer has
	DriftStatus      = "status_differs" // suspended at the vendor and active here, or the other way round
	DriftKey         = "key_differs"    // the vendor's license key is not the license's
	DriftOrphanSite  = "orphan_site"    // a vendor site no license holds: a bill nobody pays
	driftSitesPerReq = 500
	// driftLicensesPerBatch is how many licenses a check reads at a time.
	driftLicensesPerBatch = 1000
)

// DriftKinds are every kind a drift check reports, for counting each (zero included).
var DriftKinds = []string{DriftSiteGone, DriftStatus, DriftKey, DriftOrphanSite}

// Mismatch is one difference a drift check found.
type Mismatch struct {
	Kind      string
	LicenseID string // "" for an orphan site
	SiteID    string
	Domain    string
	Fixed     bool // Drift with fix applied the vendor's state to the license
}

// DriftReport is what one drift check saw.
type DriftReport struct {
	Sites      int // vendor sites read
	Licenses   int // licenses compared
	Mismatches []Mismatch
}

// Counts is the number of mismatches of each kind, every kind present.
func (r DriftReport) Counts() map[string]int {
	c := make(map[string]int, len(DriftKinds))
	for _, k := range DriftKinds {
		c[k] = 0
	}
	for _, m := range r.Mismatches {
		c[m.Kind]++
	}
	return c
}

// Drift compares every site the vendor holds with the licenses: a license
// (active or suspended, made before the check began: a newer one's site may
// lie past the pages already read) whose site is gone, whose status or key
// differs, and a vendor site no license holds. With fix, each license is
// brought in line through ApplyVendorEvent, the code a webhook runs, as an
// event of the check's start: a later webhook still wins, an older one does
// not undo the fix. A license being revoked is left to its intent; an
// orphan site is reported, never deleted.
func (s *Service) Drift(ctx context.Context, lister SiteLister, fix bool) (DriftReport, error) {
	start := s.now().UTC().Truncate(time.Microsecond)
	sites := map[string]Site{}
	for page := 1; ; page++ {
		batch, total, err := lister.ListSites(ctx, page, driftSitesPerReq)
		if err != nil {
			return DriftReport{}, fmt.Errorf("list vendor sites, page %d: %w", page, err)
		}
		for _, site := range batch {
			sites[site.ID] = site
		}
		if len(batch) < driftSitesPerReq || len(sites) >= total {
			break
		}
	}
	report := DriftReport{Sites: len(sites)}
	held := map[string]bool{}
	var fixErr error
	// In batches: a large account's licenses (and their decrypted keys) are
	// never all in memory at once.
	var batch []License
	err := s.read.WithContext(ctx).Where("status <> ?", StatusRevoked).Order("id").
		FindInBatches(&batch, driftLicensesPerBatch, func(*gorm.DB, int) error {
			for _, lic := range batch {
				held[lic.VendorSiteID] = true
				if lic.Status == StatusRevoking || !lic.CreatedAt.Before(start) {
					continue
				}
				m, ok, err := s.compare(ctx, lic, sites, start, fix)
				if err != nil {
					fixErr = err
					return err
				}
				report.Licenses++
				if ok {
					report.Mismatches = append(report.Mismatches, m)
				}
			}
			return nil
		}).Error
	if fixErr != nil {
		return report, fixErr
	}
	if err != nil {
		return DriftReport{}, fmt.Errorf("read licenses: %w", err)
	}
	var orphans []Mismatch
	for id, site := range sites {
		if !held[id] {
			orphans = append(orphans, Mismatch{Kind: DriftOrphanSite, SiteID: id, Domain: site.Domain})
		}
	}
	slices.SortFunc(orphans, func(a, b Mismatch) int { return strings.Compare(a.SiteID, b.SiteID) })
	report.Mismatches = append(report.Mismatches, orphans...)
	return report, nil
}

// compare is one license against the vendor's sites: the mismatch, if
// there is one (ok), applied with fix.
func (s *Service) compare(ctx context.Context, lic License, sites map[string]Site, start time.Time, fix bool) (m Mismatch, ok bool, err error) {
	if err := s.open(&lic); err != nil {
		return Mismatch{}, false, err
	}
	site, found := sites[lic.VendorSiteID]
	var kind, event string
	switch {
	case !found:
		kind, event, site = DriftSiteGone, SiteDeleted, Site{ID: lic.VendorSiteID}
	case site.Status == StatusSuspended && lic.Status == StatusActive:
		kind, event = DriftStatus, SiteSuspended
	case site.Status == StatusActive && lic.Status == StatusSuspended:
		kind, event = DriftStatus, SiteReactivated
	case site.LicenseKey != lic.LicenseKey:
		kind, event = DriftKey, SiteKeyRotated
	default:
		return Mismatch{}, false, nil
	}
	m = Mismatch{Kind: kind, LicenseID: lic.ID, SiteID: lic.VendorSiteID, Domain: lic.Domain}
	if fix {
		changed, err := s.ApplyVendorEvent(ctx, VendorEvent{ID: "drift", Type: event, At: start, Site: site})
		if err != nil {
			return m, false, fmt.Errorf("fix license %s: %w", lic.ID, err)
		}
		m.Fixed = changed
	}
	return m, true, nil
}
