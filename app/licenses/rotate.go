package licenses

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/fault"
)

// ErrNotActive means the license is revoked or being revoked: its key can
// no longer be rotated.
var ErrNotActive error = fault.Answer(http.StatusConflict, "license_not_active", "The license is revoked or being revoked.")

// Rotatable is the consumer's license whose key may be rotated, its key
// opened: an active license, or a suspended one (the key is the vendor's,
// and a suspension is the vendor's to lift). Anyone else's is ErrNotFound;
// a revoked or revoking one ErrNotActive.
func (s *Service) Rotatable(ctx context.Context, consumerID, id string) (License, error) {
	lic, err := s.Get(ctx, consumerID, id)
	if err == nil && lic.Status != StatusActive && lic.Status != StatusSuspended {
		err = ErrNotActive
	}
	return lic, err
}

// RotateKey asks the vendor for a new key for the license's site.
func (s *Service) RotateKey(ctx context.Context, lic License) (Site, error) {
	site, err := s.cfg.Vendor.RotateKey(ctx, lic.VendorSiteID)
	if err != nil {
		return Site{}, fmt.Errorf("rotate the vendor site's key: %w", err)
	}
	return site, nil
}

// ErrKeyMoved means the license's key changed since a rotation read it:
// another rotation was recorded meanwhile, and which of the two keys the
// vendor gave last only the vendor can tell.
var ErrKeyMoved = errors.New("the license's key changed since the rotation read it")

// KeyRotated records in tx the key the vendor now holds for the license's
// site, after a rotation a consumer asked for: the key (sealed at rest), its
// audit event EventKeyRotated by the context's actor and license.key_rotated,
// the write of the vendor's own rotation (ApplyVendorEvent). from is the key
// the rotation read before it asked the vendor: the key is recorded only
// over it (ErrKeyMoved otherwise), so that of two rotations racing, the one
// that finishes last cannot put back the key the vendor replaced. A key
// already in place (the vendor's own event told of it first) writes nothing.
// It answers the license as it then is; ErrNotActive when it was revoked
// meanwhile.
func (s *Service) KeyRotated(ctx context.Context, tx *gorm.DB, id, from, key string) (License, error) {
	var lic License
	if err := tx.Where("id = ?", id).Take(&lic).Error; err != nil {
		return License{}, fmt.Errorf("read license %s: %w", id, err)
	}
	if lic.Status != StatusActive && lic.Status != StatusSuspended {
		return License{}, ErrNotActive
	}
	after := lic
	if !s.holds(lic, key) {
		if !s.holds(lic, from) {
			return License{}, ErrKeyMoved
		}
		set := map[string]any{}
		if err := s.rekey(set, &after, key); err != nil {
			return License{}, err
		}
		changed, err := s.change(ctx, tx, lic, &after, set, EventKeyRotated, s.now())
		if err != nil {
			return License{}, err
		}
		if !changed { // the row was read in tx: only a lock-free engine's writer gets here
			return License{}, errors.New("the license changed while its key was recorded")
		}
	}
	return after, s.open(&after)
}

// RotatedSince reports whether the license's key was replaced at or after
// t: its trail holds a key_rotated since then, whoever recorded it (a
// request, the reconciler, or the vendor's own event telling of the very
// rotation a lost answer left unknown).
func (s *Service) RotatedSince(ctx context.Context, id string, t time.Time) (bool, error) {
	var n int64
	err := s.cfg.DB.WithContext(ctx).Model(&Event{}).
		Where("license_id = ? AND event = ? AND created_at >= ?", id, EventKeyRotated, t).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("read license %s's rotations: %w", id, err)
	}
	return n > 0, nil
}

// holds reports whether lic, as its row stores it, holds key.
func (s *Service) holds(lic License, key string) bool {
	return s.open(&lic) == nil && lic.LicenseKey == key
}
