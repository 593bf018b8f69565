package licenses

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/dbtime"
)

// SiteLister pages through every site the vendor holds, in a stable order
// (the vendor protocol's GET /sites?page=&per_page=).
type SiteLister interface {
	ListSites(ctx context.Context, page, perPage int) (sites []Site, total int, err error)
}

// Kinds of drift between the vendor's sites and the licenses.
const (
	DriftSiteGone         = "site_gone"      // an active or suspended license whose site the vendor no longer has
	DriftStatus           = "status_differs" // suspended at the vendor and active here, or the other way round
	DriftKey              = "key_differs"    // the vendor's license key is not the license's
	DriftOrphanSite       = "orphan_site"    // a vendor site no license holds: a bill nobody pays
	DriftDomain           = "domain_differs" // the vendor's site of the license's id is for another domain: never applied
	driftSitesPerReq      = 500
	driftLicensesPerBatch = 1000
	driftEventID          = "drift" // the event id of the changes a drift fix applies
)

// DriftKinds are every kind a drift check reports.
var DriftKinds = []string{DriftSiteGone, DriftStatus, DriftKey, DriftOrphanSite, DriftDomain}

// The sources of a site matched by id whose domain is not the license's.
const (
	MismatchWebhook = "webhook"
	MismatchDrift   = "drift"
)

// Errors of a drift check that refused to go on.
var (
	// ErrVendorListsNothing is a vendor listing no site at all while
	// licenses are in force: far likelier a vendor (or a fake vendor in a
	// new process) that lost its list than every site deleted at once. It
	// is never reported as deletions, and never fixed.
	ErrVendorListsNothing = errors.New("the vendor lists no sites")
	// ErrTooManyFixes is more destructive fixes than DriftOptions.MaxFix
	// allows: nothing is applied, and the report says what would change.
	ErrTooManyFixes = errors.New("too many destructive drift fixes")
)

// Mismatch is one difference a drift check found.
type Mismatch struct {
	Kind      string
	LicenseID string // "" for an orphan site
	SiteID    string
	Domain    string // the license's domain (the site's for an orphan)
	Action    string // "revoke", "suspend", "reactivate", "replace key"; "" when a fix does nothing
	Fixed     bool   // Drift with fix applied the vendor's state to the license
}

// Destructive reports whether the mismatch's fix loses something for good
// (a license revoked, or its old key): what DriftOptions.MaxFix bounds.
func (m Mismatch) Destructive() bool {
	return m.Kind == DriftSiteGone || m.Kind == DriftKey
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

// Destructive is how many of the mismatches a fix would revoke or re-key.
func (r DriftReport) Destructive() int { return countOf(r.Mismatches, Mismatch.Destructive) }

// Unfixed is how many of the mismatches are still there.
func (r DriftReport) Unfixed() int {
	return countOf(r.Mismatches, func(m Mismatch) bool { return !m.Fixed })
}

func countOf[T any](s []T, keep func(T) bool) (n int) {
	for _, v := range s {
		if keep(v) {
			n++
		}
	}
	return n
}

// DriftOptions are a drift check's: whether to fix, and how far.
type DriftOptions struct {
	Fix bool // bring each license in line with the vendor's site
	// MaxFix is the most destructive fixes one check applies; above it
	// nothing at all is. 0: any destructive fix needs Force.
	MaxFix int
	Force  bool // apply however many there are
}

// Drift is DriftWith forced: no bound on the fixes.
func (s *Service) Drift(ctx context.Context, lister SiteLister, fix bool) (DriftReport, error) {
	return s.DriftWith(ctx, lister, DriftOptions{Fix: fix, Force: true})
}

// DriftWith compares every site the vendor holds with the licenses in
// force made before the check began (a newer one's site may lie past the
// pages already read). A site of the license's id for another domain (the
// vendor gave the id again) is domain_differs, logged, and never applied.
//
// With Fix, each license is then brought in line through ApplyVendorEvent,
// as a webhook of the check's start: a later webhook still wins, an older
// one does not undo the fix. A license being revoked is left to its intent;
// an orphan site is never deleted. ErrVendorListsNothing holds even with
// Fix and Force.
func (s *Service) DriftWith(ctx context.Context, lister SiteLister, opts DriftOptions) (DriftReport, error) {
	start := dbtime.Stamp(s.now())
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
	var fixes []VendorEvent // fixes[i] is the fix of report.Mismatches[i] ("" Type: none)
	var openErr error
	// In batches: a large account's licenses (and their decrypted keys) are
	// never all in memory at once.
	var batch []License
	err := s.cfg.Read.WithContext(ctx).Where("status <> ?", StatusRevoked).Order("id").
		FindInBatches(&batch, driftLicensesPerBatch, func(*gorm.DB, int) error {
			for _, lic := range batch {
				held[lic.VendorSiteID] = true
				if lic.Status == StatusRevoking || !lic.CreatedAt.Before(start) {
					continue
				}
				m, fix, ok, err := s.compare(ctx, lic, sites, start)
				if err != nil {
					openErr = err
					return err
				}
				report.Licenses++
				if ok {
					report.Mismatches = append(report.Mismatches, m)
					fixes = append(fixes, fix)
				}
			}
			return nil
		}).Error
	if openErr != nil {
		return report, openErr
	}
	if err != nil {
		return DriftReport{}, fmt.Errorf("read licenses: %w", err)
	}
	if len(sites) == 0 && report.Licenses > 0 {
		return DriftReport{Licenses: report.Licenses}, fmt.Errorf("%w: refusing to treat %d license(s) as deleted",
			ErrVendorListsNothing, report.Licenses)
	}
	var orphans []Mismatch
	for id, site := range sites {
		if !held[id] {
			orphans = append(orphans, Mismatch{Kind: DriftOrphanSite, SiteID: id, Domain: site.Domain})
		}
	}
	slices.SortFunc(orphans, func(a, b Mismatch) int { return strings.Compare(a.SiteID, b.SiteID) })
	// After the licenses' mismatches: fixes[i] stays report.Mismatches[i].
	report.Mismatches = append(report.Mismatches, orphans...)
	if !opts.Fix {
		return report, nil
	}
	if d := report.Destructive(); d > opts.MaxFix && !opts.Force {
		return report, fmt.Errorf("%w: %d fix(es) would revoke a license or replace its key, more than the bound of %d; nothing applied",
			ErrTooManyFixes, d, opts.MaxFix)
	}
	for i, ev := range fixes {
		if ev.Type == "" {
			continue
		}
		m := &report.Mismatches[i]
		var changed bool
		err := s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
			changed, err = s.ApplyVendorEvent(ctx, tx, ev)
			return err
		})
		if err != nil {
			return report, fmt.Errorf("fix license %s: %w", m.LicenseID, err)
		}
		m.Fixed = changed
	}
	return report, nil
}

// compare is one license's mismatch, if any (ok), and its fix (no Type: none).
func (s *Service) compare(ctx context.Context, lic License, sites map[string]Site, start time.Time) (m Mismatch, fix VendorEvent, ok bool, err error) {
	if err := s.open(&lic); err != nil {
		return Mismatch{}, VendorEvent{}, false, err
	}
	site, found := sites[lic.VendorSiteID]
	var kind, event, action string
	switch {
	case !found:
		kind, event, action, site = DriftSiteGone, SiteDeleted, "revoke", Site{ID: lic.VendorSiteID, Domain: lic.Domain}
	case !sameDomain(site.Domain, lic.Domain):
		s.siteMismatch(ctx, MismatchDrift, driftEventID, lic, site, "the vendor's site is for another domain")
		kind = DriftDomain
	case site.Status == StatusSuspended && lic.Status == StatusActive:
		kind, event, action = DriftStatus, SiteSuspended, "suspend"
	case site.Status == StatusActive && lic.Status == StatusSuspended:
		kind, event, action = DriftStatus, SiteReactivated, "reactivate"
	case site.LicenseKey != lic.LicenseKey:
		kind, event, action = DriftKey, SiteKeyRotated, "replace key"
	default:
		return Mismatch{}, VendorEvent{}, false, nil
	}
	m = Mismatch{Kind: kind, LicenseID: lic.ID, SiteID: lic.VendorSiteID, Domain: lic.Domain, Action: action}
	if event != "" {
		fix = VendorEvent{ID: driftEventID, Type: event, At: start, Site: site}
	}
	return m, fix, true, nil
}
