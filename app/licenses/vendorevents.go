package licenses

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/dbtime"
)

// What the vendor does to a site on its own side, as its webhooks name it.
const (
	SiteSuspended   = "site.suspended"
	SiteReactivated = "site.reactivated"
	SiteDeleted     = "site.deleted"
	SiteKeyRotated  = "site.key_rotated"
)

// StatusSuspended is a license whose site the vendor suspended: still the
// consumer's, still listed and still holding its domain, until the vendor
// reactivates or deletes the site (or the consumer revokes it).
const StatusSuspended = "suspended"

// Audit events of the vendor's own changes; the actor is ActorVendor. A site
// the vendor deleted is EventRevoked by ActorVendor.
const (
	EventSuspended   = "suspended"
	EventReactivated = "reactivated"
	EventKeyRotated  = "key_rotated"
)

// ActorVendor is the actor of the changes the vendor made on its side.
const ActorVendor = "vendor"

// VendorEvent is a change the vendor made to one of its sites.
type VendorEvent struct {
	ID   string    // the vendor's event id
	Type string    // SiteSuspended, SiteReactivated, SiteDeleted or SiteKeyRotated
	At   time.Time // when the vendor made the change
	Site Site      // the site after the change (as it was, for a deletion)
}

// ErrUnknownEventType is ApplyVendorEvent's answer to a type it does not know.
var ErrUnknownEventType = errors.New("unknown vendor event type")

// ApplyVendorEvent brings the license of ev's site in line with the change the
// vendor made: deleted → revoked (its domain freed), suspended → suspended,
// reactivated → active, key rotated → the new key (encrypted at rest). Each
// change writes a license event by ActorVendor. It reports whether anything
// changed: not when no license has the site, when the site's domain is not
// the license's (or the event names none: a site is matched by its id AND
// its domain, since a vendor may give an id again; this is logged at Warn
// and counted, never applied), when the license has already
// seen a later (or the same) vendor event — so events delivered out of order
// never move a license back — or when the change is already in place.
//
// It runs in tx, the transaction its caller commits (the webhook's with
// the event's record). Call it once per event id (the webhook does, through
// its guarded operation): an event of the same second as the last one
// applied is applied again.
func (s *Service) ApplyVendorEvent(ctx context.Context, tx *gorm.DB, ev VendorEvent) (changed bool, err error) {
	switch ev.Type {
	case SiteSuspended, SiteReactivated, SiteDeleted, SiteKeyRotated:
	default:
		return false, fmt.Errorf("%w: %q", ErrUnknownEventType, ev.Type)
	}
	at := dbtime.Stamp(ev.At)
	ctx = WithActor(ctx, Actor{Name: ActorVendor})
	if ev.Type == SiteDeleted {
		// A deleted site is spent: claimed here unless a license claimed it,
		// so that a create that found it before the vendor deleted it never
		// records it (it looks again).
		if err := claimDeleted(tx, ev.Site, s.now()); err != nil {
			return false, err
		}
	}
	var lic License
	// The site's license still in force; a site id is the vendor's and
	// never given twice, so there is at most one.
	err = tx.Where("vendor_site_id = ? AND status <> ?", ev.Site.ID, StatusRevoked).Take(&lic).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find the license of site %s: %w", ev.Site.ID, err)
	}
	if !sameDomain(ev.Site.Domain, lic.Domain) {
		source, reason := MismatchWebhook, "the event's site is for another domain"
		if ev.ID == driftEventID {
			source = MismatchDrift
		}
		if strings.TrimSpace(ev.Site.Domain) == "" {
			reason = "the event's site has no domain"
		}
		s.siteMismatch(ctx, source, ev.ID, lic, ev.Site, reason)
		return false, nil
	}
	if lic.VendorEventAt != nil && at.Before(*lic.VendorEventAt) {
		// A later change of the vendor's is already applied. (Events of
		// one second cannot be ordered — created is in seconds — and are
		// applied in the order they arrive; a duplicate never reaches
		// here twice, the webhook applies each event id once.)
		return false, nil
	}
	now := s.now()
	set := map[string]any{"vendor_event_at": at}
	after := lic
	after.VendorEventAt = &at
	event := ""
	switch {
	case ev.Type == SiteDeleted:
		set["status"], set["active_domain"], set["revoked_at"] = StatusRevoked, nil, now
		after.Status, after.ActiveDomain, after.RevokedAt = StatusRevoked, nil, &now
		event = EventRevoked
	case ev.Type == SiteSuspended && lic.Status == StatusActive:
		set["status"], event = StatusSuspended, EventSuspended
		after.Status = StatusSuspended
	case ev.Type == SiteReactivated && lic.Status == StatusSuspended:
		set["status"], event = StatusActive, EventReactivated
		after.Status = StatusActive
	case ev.Type == SiteKeyRotated && ev.Site.LicenseKey != "" && !s.holds(lic, ev.Site.LicenseKey):
		if err := s.rekey(set, &after, ev.Site.LicenseKey); err != nil {
			return false, err
		}
		event = EventKeyRotated
	}
	return s.change(ctx, tx, lic, &after, set, event, now)
}

// rekey puts key in the change set writes (sealed) and in after (as the
// API shows it): the write of a new license key, the vendor's own
// rotation's and a consumer's.
func (s *Service) rekey(set map[string]any, after *License, key string) error {
	sealed, err := s.sealed(License{LicenseKey: key})
	if err != nil {
		return err
	}
	set["license_key"], after.LicenseKey = sealed.LicenseKey, key
	return nil
}

// change writes set to the license lic was read as, in tx, and, when event
// is not "", the events of the change (after is the license as it leaves
// it, its updated_at and event sequence set here). changed is false when the license was changed meanwhile, or when
// there is no event to write.
func (s *Service) change(ctx context.Context, tx *gorm.DB, lic License, after *License, set map[string]any, event string, now time.Time) (changed bool, err error) {
	if event != "" {
		// Every change here is one the consumer hears of: its event
		// carries the license as the API shows it, with the next
		// sequence (the compare-and-set below holds the one read). An
		// event that changes nothing the consumer sees (a suspension of
		// a suspended license) moves only the vendor's mark, not
		// updated_at: no change without its event.
		set["updated_at"], after.UpdatedAt = now, now
		set["event_sequence"] = lic.EventSequence + 1
		after.EventSequence = lic.EventSequence + 1
		s.openForEvent(ctx, after)
	}
	// Compare-and-set on what was read: a concurrent change to the same
	// license (another event, a revoke) makes this one a no-op rather
	// than overwrite it.
	q := tx.Model(&License{}).Where("id = ? AND status = ? AND event_sequence = ?", lic.ID, lic.Status, lic.EventSequence)
	if lic.VendorEventAt == nil {
		q = q.Where("vendor_event_at IS NULL")
	} else {
		q = q.Where("vendor_event_at = ?", *lic.VendorEventAt)
	}
	res := q.UpdateColumns(set) // no automatic updated_at: set above when the change is one the consumer sees
	if res.Error != nil {
		return false, fmt.Errorf("change license %s (%s): %w", lic.ID, event, res.Error)
	}
	if res.RowsAffected != 1 || event == "" {
		return false, nil
	}
	return true, s.logEvent(ctx, tx, *after, event, now)
}

// sameDomain reports whether a vendor site's domain is the license's: DNS
// names ignore case. An empty domain is no one's.
func sameDomain(site, license string) bool {
	site = strings.TrimSpace(site)
	return site != "" && strings.EqualFold(site, license)
}

// siteMismatch logs (Warn) and counts a vendor site whose id is the
// license's and whose domain is not: nothing is applied to the license. It
// logs ids only: no key, and neither domain (the license's is the
// consumer's to show).
func (s *Service) siteMismatch(ctx context.Context, source, eventID string, lic License, site Site, reason string) {
	s.cfg.ObserveSiteMismatch(source)
	s.cfg.Log.WarnContext(ctx, "vendor site matches a license by id but not by domain: not applied",
		"source", source, "event_id", eventID, "site_id", site.ID, "license_id", lic.ID, "reason", reason)
}
