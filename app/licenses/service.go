package licenses

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"
)

// Config is what a Service needs.
type Config struct {
	DB     *gorm.DB
	Vendor Vendor
	Now    func() time.Time // nil: time.Now
}

// Service creates, lists, shows and revokes licenses. It runs on the
// caller's context as it is: a caller that must not be cut short by a client
// hanging up (the idempotency layer) detaches and bounds it first.
type Service struct {
	db     *gorm.DB
	vendor Vendor
	now    func() time.Time
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{db: cfg.DB, vendor: cfg.Vendor, now: cfg.Now}
}

// Create licenses the domain to the consumer. created is false when the
// consumer already held an active license for the domain, which is returned
// as it is, with no vendor call. Another consumer's domain is ErrDomainTaken.
// Vendor failures come back as *UnavailableError, *RejectedError or
// *UncertainError.
func (s *Service) Create(ctx context.Context, consumerID string, in Input) (lic License, created bool, err error) {
	if in, err = Validate(in); err != nil {
		return License{}, false, err
	}
	if lic, err := s.activeFor(ctx, consumerID, in.Domain); err == nil || !errors.Is(err, ErrNotFound) {
		return lic, false, err
	}
	site, _, err := EnsureSite(ctx, s.vendor, in.Name, in.Domain)
	var uncertain *UncertainError
	if errors.As(err, &uncertain) {
		uncertain.Domain = in.Domain // what the pending intent is known by until a site id is
	}
	if err != nil {
		return License{}, false, err
	}
	lic, created, err = s.record(ctx, consumerID, in, site)
	if err != nil && !errors.Is(err, ErrDomainTaken) {
		// The vendor holds the site but it is not recorded here: the outcome is
		// as unknown as a lost answer, and is reconciled the same way.
		return License{}, false, &UncertainError{Err: err, Domain: in.Domain}
	}
	return lic, created, err
}

// Resume finishes a create whose outcome was unknown. It adopts the vendor's
// site for the domain when there is one; when there is none it creates one
// (listing first, as always) only if mayCreate, and otherwise reports
// found=false. The license is recorded as Create would have.
func (s *Service) Resume(ctx context.Context, consumerID string, in Input, mayCreate bool) (lic License, created, found bool, err error) {
	if in, err = Validate(in); err != nil {
		return License{}, false, false, err
	}
	site, err := s.vendor.FindSite(ctx, in.Domain)
	if err != nil {
		return License{}, false, false, fmt.Errorf("find vendor site: %w", err)
	}
	if site == nil {
		if !mayCreate {
			return License{}, false, false, nil
		}
		made, _, err := EnsureSite(ctx, s.vendor, in.Name, in.Domain)
		if err != nil {
			return License{}, false, false, err
		}
		site = &made
	}
	lic, created, err = s.record(ctx, consumerID, in, *site)
	return lic, created, err == nil, err
}

// record writes the license row. The unique index on active_domain decides a
// race: the loser reads the winner's row and answers as if it had come second.
func (s *Service) record(ctx context.Context, consumerID string, in Input, site Site) (License, bool, error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	lic := License{
		ID:           ulid.Make().String(),
		ConsumerID:   consumerID,
		Name:         in.Name,
		Domain:       in.Domain,
		ActiveDomain: &in.Domain,
		LicenseKey:   site.LicenseKey,
		Status:       StatusActive,
		VendorSiteID: site.ID,
		CreatedAt:    now,
		UpdatedAt:    now,
	}
	err := s.db.WithContext(ctx).Create(&lic).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		existing, err := s.activeFor(ctx, consumerID, in.Domain)
		return existing, false, err
	}
	if err != nil {
		return License{}, false, fmt.Errorf("store license: %w", err)
	}
	return lic, true, nil
}

// activeFor returns the active license for the domain if the consumer holds
// it, ErrDomainTaken if another does, ErrNotFound if nobody does.
func (s *Service) activeFor(ctx context.Context, consumerID, domain string) (License, error) {
	var lic License
	err := s.db.WithContext(ctx).Where("active_domain = ?", domain).Take(&lic).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return License{}, ErrNotFound
	case err != nil:
		return License{}, fmt.Errorf("find license by domain: %w", err)
	case lic.ConsumerID != consumerID:
		return License{}, ErrDomainTaken
	}
	return lic, nil
}

// Page is one page of a consumer's licenses.
type Page struct {
	Licenses []License
	Total    int64
}

// List returns the consumer's active licenses, newest first.
func (s *Service) List(ctx context.Context, consumerID string, page, perPage int) (Page, error) {
	q := s.db.WithContext(ctx).Model(&License{}).Where("consumer_id = ? AND status = ?", consumerID, StatusActive)
	var p Page
	if err := q.Count(&p.Total).Error; err != nil {
		return Page{}, fmt.Errorf("count licenses: %w", err)
	}
	err := q.Order("created_at DESC, id DESC").Offset((page - 1) * perPage).Limit(perPage).Find(&p.Licenses).Error
	if err != nil {
		return Page{}, fmt.Errorf("list licenses: %w", err)
	}
	return p, nil
}

// Get returns the consumer's license; anyone else's is ErrNotFound.
func (s *Service) Get(ctx context.Context, consumerID, id string) (License, error) {
	var lic License
	err := s.db.WithContext(ctx).Where("id = ? AND consumer_id = ?", id, consumerID).Take(&lic).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return License{}, ErrNotFound
	}
	if err != nil {
		return License{}, fmt.Errorf("get license: %w", err)
	}
	return lic, nil
}

// Revoke deletes the vendor's site and marks the license revoked, freeing the
// domain. Revoking a revoked license does nothing and is no error. If the
// vendor fails, the license stays active.
func (s *Service) Revoke(ctx context.Context, consumerID, id string) error {
	lic, err := s.Get(ctx, consumerID, id)
	if err != nil || lic.Status == StatusRevoked {
		return err
	}
	if err := s.vendor.DeleteSite(ctx, lic.VendorSiteID); err != nil {
		// A delete is safe to repeat (the vendor's 404 counts as done), so an
		// unknown outcome is only "try again", never a pending intent.
		var uncertain *UncertainError
		if errors.As(err, &uncertain) {
			err = &UnavailableError{Err: uncertain.Err}
		}
		return fmt.Errorf("delete vendor site: %w", err)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	err = s.db.WithContext(ctx).Model(&License{}).Where("id = ? AND status = ?", id, StatusActive).
		Updates(map[string]any{"status": StatusRevoked, "active_domain": nil, "revoked_at": now, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("revoke license: %w", err)
	}
	return nil
}
