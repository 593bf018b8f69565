package licenses

import (
	"context"

	"gorm.io/gorm"
)

// The changes the guarded operations make (app/operations), composed from
// the service's writes in their order, each transaction also running also
// (nil: nothing) as the operation's last phase writes its record there: the
// fixtures of these tests, and the changes whose atomicity they check. The
// phases around them, and their failures, are app/operations' tests.

// create licenses in's domain to the consumer, made by intent ("" for
// none), as the create operation's phases do; created is false for a
// domain the consumer held.
func (s *Service) create(ctx context.Context, consumerID string, in Input, intent string, also func(*gorm.DB) error) (License, bool, error) {
	if lic, err := s.Held(ctx, consumerID, in.Domain); err != ErrNotFound {
		return lic, false, err
	}
	site, made, err := s.EnsureSite(ctx, in)
	if err != nil {
		return License{}, false, err
	}
	event := EventAdopted
	if made {
		event = EventCreated
	}
	return s.record(ctx, consumerID, in, site, event, intent, also)
}

// record writes the license of site in one transaction, with also.
func (s *Service) record(ctx context.Context, consumerID string, in Input, site Site, event, intent string, also func(*gorm.DB) error) (License, bool, error) {
	n, err := s.Draft(ctx, consumerID, in, site, event, intent)
	if err != nil {
		return License{}, false, err
	}
	err = s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := s.Insert(tx, n); err != nil {
			return err
		}
		return run(also, tx)
	})
	if err != nil {
		return License{}, false, err
	}
	s.LicenseMade()
	return n.License, true, nil
}

// revoke revokes the consumer's license as the revoke operation's phases do.
func (s *Service) revoke(ctx context.Context, consumerID, id string, also func(*gorm.DB) error) error {
	lic, err := s.Revocable(ctx, consumerID, id)
	if err != nil || lic.Status == StatusRevoked {
		return err
	}
	if _, err := s.MarkRevoking(ctx, lic); err != nil {
		return err
	}
	return s.finishRevoke(ctx, lic, also)
}

// finishRevoke deletes the license's site and marks it revoked, with also.
func (s *Service) finishRevoke(ctx context.Context, lic License, also func(*gorm.DB) error) error {
	if err := s.DeleteSite(ctx, lic); err != nil {
		return err
	}
	return s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if _, err := s.Revoked(ctx, tx, lic); err != nil {
			return err
		}
		return run(also, tx)
	})
}

// apply applies a vendor event in a transaction of its own.
func (s *Service) apply(ctx context.Context, ev VendorEvent) (changed bool, err error) {
	err = s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) (err error) {
		changed, err = s.ApplyVendorEvent(ctx, tx, ev)
		return err
	})
	return changed, err
}

func run(also func(*gorm.DB) error, tx *gorm.DB) error {
	if also == nil {
		return nil
	}
	return also(tx)
}
