package licenses

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/internal/dbtime"
)

// Config is what a Service needs.
type Config struct {
	DB *gorm.DB
	// Read serves the reads (a license, a list, a domain lookup): SQLite's
	// read-only pool, or on MySQL the one pool. Nil: DB.
	Read   *gorm.DB
	Vendor Vendor
	Cipher Cipher           // encrypts license keys at rest; required
	Now    func() time.Time // nil: time.Now
	// Retry runs a statement again while it loses a lock conflict
	// (database.RetryOnConflict); a transaction of a change is run again
	// whole. Nil runs it once.
	Retry func(ctx context.Context, stmt func() *gorm.DB) *gorm.DB
	// Log receives the warnings of a vendor site whose id matches a
	// license but whose domain does not (nil: discarded).
	Log *slog.Logger
	// ObserveSiteMismatch counts each such site, by source ("webhook" or
	// "drift"); nil counts nothing.
	ObserveSiteMismatch func(source string)
	// ObserveCreated is told once for each license made: after the
	// transaction that wrote its row committed (a create, keyed or not, or
	// a pending create resumed). Nil counts nothing.
	ObserveCreated func()
	// Events is the consumer events' outbox each change writes to, in its
	// own transaction (app/events' *Log). Nil: one on DB, sealed with
	// Cipher (there is no Service without its events).
	Events Outbox
}

// Outbox writes a consumer event within the transaction of its change:
// Seal renders and seals it (before the transaction, where the change
// knows it then), Insert writes it.
type Outbox interface {
	Seal(d events.Draft) (events.Event, error)
	Insert(tx *gorm.DB, e *events.Event) error
}

// Service lists, shows and changes licenses. Its writes that a guarded
// operation makes (a license recorded, revoked) run in the transaction they
// are given, which the operation's last phase commits with its answer. It
// runs on the caller's context as it is: a caller that must not be cut
// short by a client hanging up (the idempotency layer) detaches and bounds
// it first.
type Service struct {
	cfg Config
}

// New returns a Service. It panics without a Cipher: license keys are never
// written in plaintext.
func New(cfg Config) *Service {
	if cfg.Cipher == nil {
		panic("licenses: New needs a Cipher")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Read == nil {
		cfg.Read = cfg.DB
	}
	if cfg.Retry == nil {
		cfg.Retry = func(_ context.Context, stmt func() *gorm.DB) *gorm.DB { return stmt() }
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ObserveSiteMismatch == nil {
		cfg.ObserveSiteMismatch = func(string) {}
	}
	if cfg.Events == nil {
		cfg.Events = events.New(cfg.DB, cfg.Read, cfg.Cipher)
	}
	if cfg.ObserveCreated == nil {
		cfg.ObserveCreated = func() {}
	}
	return &Service{cfg: cfg}
}

// now is the clock, in UTC to the microsecond, as both databases store it.
func (s *Service) now() time.Time { return dbtime.Stamp(s.cfg.Now()) }

// Held returns the active license for the domain if the consumer holds
// it, ErrDomainTaken if another does, ErrNotFound if nobody does.
func (s *Service) Held(ctx context.Context, consumerID, domain string) (License, error) {
	var lic License
	err := s.cfg.Read.WithContext(ctx).Where("active_domain = ?", domain).Take(&lic).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return License{}, ErrNotFound
	case err != nil:
		return License{}, fmt.Errorf("find license by domain: %w", err)
	case lic.ConsumerID != consumerID:
		return License{}, ErrDomainTaken
	}
	if err := s.open(&lic); err != nil {
		return License{}, err
	}
	return lic, nil
}

// EnsureSite asks the vendor for the site of in's domain, made when it has
// none (created true) and taken on when it has (see EnsureSite). An
// uncertain outcome is known by the domain until a site id is.
func (s *Service) EnsureSite(ctx context.Context, in Input) (site Site, created bool, err error) {
	site, created, err = EnsureSite(ctx, s.cfg.Vendor, in.Name, in.Domain)
	var uncertain *UncertainError
	if errors.As(err, &uncertain) {
		uncertain.Domain = in.Domain
	}
	return site, created, err
}

// FindSite is the vendor's site for the domain, nil when it has none.
func (s *Service) FindSite(ctx context.Context, domain string) (*Site, error) {
	site, err := s.cfg.Vendor.FindSite(ctx, domain)
	if err != nil {
		return nil, fmt.Errorf("find vendor site: %w", err)
	}
	return site, nil
}

// NewLicense is a license about to be recorded, with its audit and consumer
// events: what Insert writes.
type NewLicense struct {
	License
	// Reclaim takes over the claim of a license that no longer holds the
	// site (revoked): set when the vendor listed the site again after it
	// was found spent, so that the vendor still has it.
	Reclaim bool
	row     License       // as stored: the key sealed
	event   string        // its audit event: EventCreated, EventAdopted or EventReconciled
	sent    *events.Event // its consumer event, sealed
	actor   Actor
}

// Draft makes the license of site for in (which has passed Validate), held
// by the consumer and made by the intent intentID, ready to Insert: its
// key sealed and its consumer event rendered before any transaction, so
// that only the INSERTs are in it. event is its audit event.
func (s *Service) Draft(ctx context.Context, consumerID string, in Input, site Site, event, intentID string) (NewLicense, error) {
	now := s.now()
	lic := License{
		ID:           ulid.Make().String(),
		ConsumerID:   consumerID,
		Name:         in.Name,
		Domain:       in.Domain,
		ActiveDomain: &in.Domain,
		LicenseKey:   site.LicenseKey,
		Status:       StatusActive,
		VendorSiteID: site.ID,
		IntentID:     nonEmpty(intentID),
		// A creation is always a consumer event (license.created), the first.
		EventSequence: 1,
		CreatedAt:     now,
		UpdatedAt:     now,
	}
	row, err := s.sealed(lic)
	if err != nil {
		return NewLicense{}, err
	}
	sent, err := s.sealEvent(lic, event, now)
	if err != nil {
		return NewLicense{}, err
	}
	return NewLicense{License: lic, row: row, event: event, sent: sent, actor: actorFrom(ctx)}, nil
}

// Insert writes the license row, its claim of its vendor site and its
// events in tx. The unique index on active_domain decides a race: the loser
// gets gorm.ErrDuplicatedKey, and the domain's license is the winner's
// (Held). A site claimed before (its license since revoked, or discarded)
// is ErrSiteSpent. It may run again in a transaction run again.
func (s *Service) Insert(tx *gorm.DB, n NewLicense) error {
	row := n.row // a fresh row each run
	if err := tx.Create(&row).Error; err != nil {
		return err
	}
	if err := claimFor(tx, n.License, n.Reclaim, n.CreatedAt); err != nil {
		return err
	}
	var sent *events.Event
	if n.sent != nil {
		fresh := *n.sent // a fresh row each run: a transaction run again inserts it anew
		sent = &fresh
	}
	return s.logSealed(n.actor, tx, n.License, n.event, n.CreatedAt, sent)
}

// LicenseMade counts a license whose Insert committed (Config.ObserveCreated).
func (s *Service) LicenseMade() { s.cfg.ObserveCreated() }

// nonEmpty is &s, nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// listedStatuses are the statuses a consumer's list shows: every license not
// revoked (active, suspended by the vendor, or being revoked).
var listedStatuses = []string{StatusActive, StatusSuspended, StatusRevoking}

// Page is one page of a consumer's licenses.
type Page struct {
	Licenses []License
	Total    int64
}

// List returns the consumer's licenses that are not revoked (active,
// suspended, or being revoked), newest first.
func (s *Service) List(ctx context.Context, consumerID string, page, perPage int) (Page, error) {
	q := s.cfg.Read.WithContext(ctx).Model(&License{}).Where("consumer_id = ? AND status IN ?", consumerID, listedStatuses)
	var p Page
	if err := q.Count(&p.Total).Error; err != nil {
		return Page{}, fmt.Errorf("count licenses: %w", err)
	}
	err := q.Order("created_at DESC, id DESC").Offset((page - 1) * perPage).Limit(perPage).Find(&p.Licenses).Error
	if err != nil {
		return Page{}, fmt.Errorf("list licenses: %w", err)
	}
	for i := range p.Licenses {
		if err := s.open(&p.Licenses[i]); err != nil {
			return Page{}, err
		}
	}
	return p, nil
}

// Cursor is a position in a consumer's list, newest first: the (created_at,
// id) of a boundary row, and which way to read from it. Next: the rows after
// it (older); otherwise the rows before it (newer), as Laravel's cursor
// points to next or previous items.
type Cursor struct {
	CreatedAt time.Time
	ID        string
	Next      bool
}

// CursorPage is one page of a keyset listing. More says whether rows lie
// beyond it in the direction it was read.
type CursorPage struct {
	Licenses []License
	More     bool
}

// ListCursor returns up to perPage of the consumer's licenses that List
// would, in the same order (created_at DESC, id DESC), from the cursor on;
// a nil cursor is the first page. It is a keyset query on (created_at, id)
// with no COUNT and no OFFSET, so any page costs what the first does.
func (s *Service) ListCursor(ctx context.Context, consumerID string, cur *Cursor, perPage int) (CursorPage, error) {
	q := s.cfg.Read.WithContext(ctx).Model(&License{}).Where("consumer_id = ? AND status IN ?", consumerID, listedStatuses)
	backward := cur != nil && !cur.Next
	switch {
	case cur == nil:
		q = q.Order("created_at DESC, id DESC")
	case cur.Next:
		q = q.Where("(created_at, id) < (?, ?)", cur.CreatedAt.UTC(), cur.ID).Order("created_at DESC, id DESC")
	default:
		q = q.Where("(created_at, id) > (?, ?)", cur.CreatedAt.UTC(), cur.ID).Order("created_at ASC, id ASC")
	}
	var p CursorPage
	if err := q.Limit(perPage + 1).Find(&p.Licenses).Error; err != nil {
		return CursorPage{}, fmt.Errorf("list licenses after a cursor: %w", err)
	}
	if len(p.Licenses) > perPage {
		p.More, p.Licenses = true, p.Licenses[:perPage]
	}
	if backward {
		slices.Reverse(p.Licenses)
	}
	for i := range p.Licenses {
		if err := s.open(&p.Licenses[i]); err != nil {
			return CursorPage{}, err
		}
	}
	return p, nil
}

// Get returns the consumer's license; anyone else's is ErrNotFound.
func (s *Service) Get(ctx context.Context, consumerID, id string) (License, error) {
	lic, err := s.find(ctx, consumerID, id)
	if err != nil {
		return License{}, err
	}
	if err := s.open(&lic); err != nil {
		return License{}, err
	}
	return lic, nil
}

// find returns the consumer's license as its row stores it, the license key
// still encrypted: what revoking and the audit trail need, which works even
// when the key cannot be decrypted.
func (s *Service) find(ctx context.Context, consumerID, id string) (License, error) {
	var lic License
	err := s.cfg.Read.WithContext(ctx).Where("id = ? AND consumer_id = ?", id, consumerID).Take(&lic).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return License{}, ErrNotFound
	}
	if err != nil {
		return License{}, fmt.Errorf("get license: %w", err)
	}
	return lic, nil
}

// Revocable is the consumer's license as its row stores it, the license
// key still encrypted: what revoking and the audit trail need, which works
// even when the key cannot be decrypted. Anyone else's is ErrNotFound.
func (s *Service) Revocable(ctx context.Context, consumerID, id string) (License, error) {
	return s.find(ctx, consumerID, id)
}

// MarkRevoking moves an active or suspended license to revoking before the
// vendor hears of its revoke, so that a process that dies mid-call leaves a
// trace the reconciler finishes. marked says this call moved it (and so may
// move it back: Reopen).
func (s *Service) MarkRevoking(ctx context.Context, lic License) (marked bool, err error) {
	if lic.Status != StatusActive && lic.Status != StatusSuspended {
		return false, nil
	}
	res := s.cfg.DB.WithContext(ctx).Model(&License{}).Where("id = ? AND status = ?", lic.ID, lic.Status).
		Updates(map[string]any{"status": StatusRevoking, "updated_at": s.now()})
	if res.Error != nil {
		return false, fmt.Errorf("mark license revoking: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// DeleteSite asks the vendor to delete the license's site.
func (s *Service) DeleteSite(ctx context.Context, lic License) error {
	if err := s.cfg.Vendor.DeleteSite(ctx, lic.VendorSiteID); err != nil {
		return fmt.Errorf("delete vendor site: %w", err)
	}
	return nil
}

// Reopen puts back a license MarkRevoking moved, as it was (lic's status),
// once its revoke ended without effect at the vendor; its event is
// EventFailed. A failed revoke changed nothing a consumer sees and has no
// consumer event, unless one was published while the license was revoking
// (the vendor rotated its key meanwhile, say): that event showed it
// revoking, so the license as it is again is published after it
// (republish), and the feed's last event is the license as it is.
func (s *Service) Reopen(ctx context.Context, lic License) error {
	return s.cfg.Retry(ctx, func() *gorm.DB {
		return &gorm.DB{Error: s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			moved, err := s.move(ctx, tx, lic, StatusRevoking, lic.Status, EventFailed)
			if err != nil || !moved {
				return err
			}
			return s.republish(ctx, tx, lic)
		})}
	}).Error
}

// republish writes, in tx, a consumer event of the license as it is when
// one was published since lic was read: license.reactivated, or
// license.suspended for a suspended license. Its audit trail has the
// change's own event already.
func (s *Service) republish(ctx context.Context, tx *gorm.DB, lic License) error {
	var seq uint64
	if err := tx.Model(&License{}).Where("id = ?", lic.ID).Pluck("event_sequence", &seq).Error; err != nil {
		return fmt.Errorf("read the license %s's event sequence: %w", lic.ID, err)
	}
	if seq == lic.EventSequence {
		return nil
	}
	now := s.now()
	if err := tx.Model(&License{}).Where("id = ?", lic.ID).
		Updates(map[string]any{"event_sequence": gorm.Expr("event_sequence + 1"), "updated_at": now}).Error; err != nil {
		return fmt.Errorf("republish license %s: %w", lic.ID, err)
	}
	var after License
	if err := tx.Where("id = ?", lic.ID).Take(&after).Error; err != nil {
		return fmt.Errorf("read the license %s as republished: %w", lic.ID, err)
	}
	s.openForEvent(ctx, &after)
	event := EventReactivated
	if after.Status == StatusSuspended {
		event = EventSuspended
	}
	ce, err := s.sealEvent(after, event, now)
	if err != nil {
		return err
	}
	return s.cfg.Events.Insert(tx, ce)
}

// Revoked marks the license revoked in tx, freeing its domain, with its
// events, once the vendor deleted its site. moved is false when it was
// revoked already (someone else settled it): nothing is written.
func (s *Service) Revoked(ctx context.Context, tx *gorm.DB, lic License) (moved bool, err error) {
	return s.move(ctx, tx, lic, "", StatusRevoked, EventRevoked)
}

// move moves the license to status to (from from, or from any state but
// revoked when from is "") in tx, and writes its events; moved is false
// when there was nothing to move.
func (s *Service) move(ctx context.Context, tx *gorm.DB, lic License, from, to, event string) (moved bool, err error) {
	now := s.now()
	set := map[string]any{"status": to, "updated_at": now}
	if to == StatusRevoked {
		set["active_domain"], set["revoked_at"] = nil, now
	}
	if publishes(event) {
		set["event_sequence"] = gorm.Expr("event_sequence + 1")
	}
	q := tx.Model(&License{}).Where("id = ?", lic.ID)
	if from != "" {
		q = q.Where("status = ?", from)
	} else {
		q = q.Where("status <> ?", StatusRevoked)
	}
	res := q.Updates(set)
	if res.Error != nil || res.RowsAffected == 0 {
		return false, res.Error // nothing to move: someone else settled it
	}
	after := lic
	if publishes(event) {
		// The license as this change left it, read in its transaction
		// (which reads its own writes): a key the vendor rotated since
		// lic was read is the one the event carries, with the sequence
		// the UPDATE wrote.
		if err := tx.Where("id = ?", lic.ID).Take(&after).Error; err != nil {
			return false, fmt.Errorf("read the license %s as changed: %w", lic.ID, err)
		}
		s.openForEvent(ctx, &after) // the event carries the license as the API shows it
	}
	if err := s.logEvent(ctx, tx, after, event, now); err != nil {
		return false, err
	}
	return true, nil
}
