package licenses

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/licensor-api/licensor/internal/fault"
)

// Site is the vendor's record for one domain, carrying its license key.
type Site struct {
	ID         string
	Name       string
	Domain     string
	LicenseKey string
	Status     string
}

// Vendor is what the domain needs from the upstream license vendor. The
// vendor offers no idempotency key, so a driver retries only what certainly
// had no effect (a 429) and classifies every failure as one of
// *UnavailableError, *RejectedError or *UncertainError.
type Vendor interface {
	// FindSite returns the vendor's site for the domain, or nil when it has none.
	FindSite(ctx context.Context, domain string) (*Site, error)
	// CreateSite asks the vendor to create a site for the domain.
	CreateSite(ctx context.Context, name, domain string) (Site, error)
	// DeleteSite deletes a site; a site already gone counts as deleted.
	DeleteSite(ctx context.Context, id string) error
	// RotateKey asks the vendor for a new license key for the site. Like a
	// create, a failure after sending is uncertain (the key may have
	// changed). A site the vendor does not hold is ErrVendorSiteNotFound.
	RotateKey(ctx context.Context, siteID string) (Site, error)
}

// ErrVendorSiteNotFound is the vendor's 404 for a site id. A driver's error
// for it is a *RejectedError too: errors.Is matches either.
var ErrVendorSiteNotFound = errors.New("the vendor has no such site")

// EnsureSite converges on the natural key: it adopts the domain's site, and
// creates one only when there is none, so two attempts at one domain end at
// the same site. The vendor keeps one site per domain, so the loser of a
// race past the list is refused, lists once more and adopts the winner's.
func EnsureSite(ctx context.Context, v Vendor, name, domain string) (site Site, created bool, err error) {
	found, err := v.FindSite(ctx, domain)
	if err != nil {
		return Site{}, false, fmt.Errorf("find vendor site: %w", err)
	}
	if found != nil {
		return *found, false, nil
	}
	for try := 0; ; try++ {
		site, err = v.CreateSite(ctx, name, domain)
		if !errors.Is(err, ErrVendorRejected) {
			break
		}
		// Refused: perhaps because a racing create made the domain's site
		// after our list. Look again; a site there is the one to adopt.
		again, ferr := v.FindSite(ctx, domain)
		if ferr != nil {
			// The look that would tell a race from a real refusal failed: the
			// refusal is not definite (a retry may well adopt the site), and
			// the create had no effect. Answer what the look met (unavailable).
			return Site{}, false, fmt.Errorf("find vendor site after a refused create: %w", ferr)
		}
		if again != nil {
			return *again, false, nil
		}
		if try > 0 || !refusedForDomain(err) {
			break
		}
		// Refused for the domain, which has no site by now: perhaps a revoke
		// deleted the site that held it in between, so it is asked once more
		// (a refused create had no effect). A domain the vendor refuses for
		// a reason of its own is refused again, and that is the answer.
	}
	if err != nil {
		return Site{}, false, fmt.Errorf("create vendor site: %w", err)
	}
	return site, true, nil
}

// refusedForDomain reports whether the vendor's refusal named the domain
// (the one site per domain it keeps), not the request's other fields.
func refusedForDomain(err error) bool {
	var r *RejectedError
	return errors.As(err, &r) && len(r.Fields["domain"]) > 0 && len(r.Fields) == 1
}

// Sentinels for the three classes of vendor failure; each typed error
// unwraps to its own first, then to its cause.
var (
	ErrVendorUnavailable error = fault.New("vendor_unavailable", "vendor unavailable")
	ErrVendorRejected    error = fault.New("vendor_rejected", "vendor rejected the request")
	ErrVendorUncertain   error = fault.New("vendor_uncertain", "vendor outcome unknown")
)

// UnavailableError means the vendor did nothing: it could not be reached,
// failed a read, or kept answering 429 past the retry budget. Safe to retry.
type UnavailableError struct {
	RetryAfter time.Duration // the vendor's last Retry-After, when it gave one
	Err        error
}

func (e *UnavailableError) Error() string { return "vendor unavailable: " + errText(e.Err) }

// Unwrap is ErrVendorUnavailable, then the cause.
func (e *UnavailableError) Unwrap() []error { return classAndCause(ErrVendorUnavailable, e.Err) }

// RejectedError means the vendor refused the input (a 4xx other than 429):
// definite, no effect, and the same request will be refused again.
type RejectedError struct {
	Status  int
	Message string
	Fields  map[string][]string // the vendor's field errors, if any
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("vendor rejected the request (%d): %s", e.Status, e.Message)
}

// Unwrap is ErrVendorRejected: the class, never the vendor's message.
func (e *RejectedError) Unwrap() error { return ErrVendorRejected }

// UncertainError means a write was sent and its outcome is unknown (a timeout
// after sending, a reset, a 5xx, an unreadable answer). The write may have
// happened: reconcile through the natural key, never resend blindly.
type UncertainError struct {
	Err    error
	Domain string // the normalised domain the write was for: the intent's ExternalRef
}

func (e *UncertainError) Error() string { return "vendor outcome unknown: " + errText(e.Err) }

// Unwrap is ErrVendorUncertain, then the cause.
func (e *UncertainError) Unwrap() []error { return classAndCause(ErrVendorUncertain, e.Err) }

// OutcomeUnknown tells the idempotency layer to keep the intent pending.
func (e *UncertainError) OutcomeUnknown() bool { return true }

// ExternalRef is what the pending intent is known by at the vendor: the
// domain (the natural key), since no site id is known yet.
func (e *UncertainError) ExternalRef() string { return e.Domain }

// An uncertain error tells the idempotency layer, which declares these
// interfaces, that the outcome is unknown and what the intent is known by.
var (
	_ interface{ OutcomeUnknown() bool } = (*UncertainError)(nil)
	_ interface{ ExternalRef() string }  = (*UncertainError)(nil)
)

func classAndCause(class, cause error) []error {
	if cause == nil {
		return []error{class}
	}
	return []error{class, cause}
}

func errText(err error) string {
	if err == nil {
		return "no detail"
	}
	return err.Error()
}

// ClearSite deletes the vendor's site for the domain unless a license holds
// it, for an intent discarded after its create may have reached the vendor:
// the site is claimed as discarded first (DiscardSite), so that a create
// recording it meanwhile keeps it. Any failure of the vendor's is an
// *UnavailableError; the site is then claimed as discarded, its delete owed
// (DeleteOwedSites), and a second ClearSite deletes it too.
func (s *Service) ClearSite(ctx context.Context, domain string) (deleted bool, err error) {
	site, err := s.cfg.Vendor.FindSite(ctx, domain)
	if err != nil {
		return false, asUnavailable(fmt.Errorf("find vendor site: %w", err))
	}
	if site == nil {
		return false, nil
	}
	var held int64
	err = s.cfg.DB.WithContext(ctx).Model(&License{}).
		Where("(vendor_site_id = ? AND status <> ?) OR active_domain = ?", site.ID, StatusRevoked, domain).Count(&held).Error
	if err != nil {
		return false, fmt.Errorf("find the license of a vendor site: %w", err)
	}
	if held > 0 {
		return false, nil
	}
	if claimed, err := s.claimDiscarded(ctx, site.ID, domain, true); err != nil || !claimed {
		return false, err
	}
	if err := s.deleteOwed(ctx, site.ID, claimDomain(domain)); err != nil { // owed: DeleteOwedSites retries it
		return false, asUnavailable(err)
	}
	return true, nil
}

// asUnavailable is err as an *UnavailableError: for an operator's action
// that needs the vendor's answer, any failure is that it could not be asked.
func asUnavailable(err error) error {
	var u *UnavailableError
	if errors.As(err, &u) {
		return err
	}
	return &UnavailableError{Err: err}
}
