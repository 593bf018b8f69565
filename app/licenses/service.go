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
	"github.com/licensor-api/licensor/internal/fault"
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

// Service creates, lists, shows and revokes licenses. It runs on the
// caller's context as it is: a caller that must not be cut short by a client
// hanging up (the idempotency layer) detaches and bounds it first.
type Service struct {
	db     *gorm.DB // writes, and reads inside them
	read   *gorm.DB // reads on their own
	vendor Vendor
	cipher Cipher
	now    func() time.Time
	retry  func(ctx context.Context, stmt func() *gorm.DB) *gorm.DB
	log    *slog.Logger
	events Outbox
	// observeMismatch counts a site matched by id and not by domain.
	observeMismatch func(source string)
	// observeCreated counts a license made.
	observeCreated func()
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
	return &Service{db: cfg.DB, read: cfg.Read, vendor: cfg.Vendor, cipher: cfg.Cipher, now: cfg.Now, retry: cfg.Retry,
		log: cfg.Log, events: cfg.Events, observeMismatch: cfg.ObserveSiteMismatch, observeCreated: cfg.ObserveCreated}
}

// transact runs fn in one transaction, and again, whole, while it loses a
// lock conflict (a deadlock rolled all of it back). fn must be safe to run
// again: it writes what it was given, nothing it read before.
func (s *Service) transact(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.retry(ctx, func() *gorm.DB {
		return &gorm.DB{Error: s.db.WithContext(ctx).Transaction(fn)}
	}).Error
}

// Steps are the caller's recovery points around a change, each written with
// the change's own writes: Started before the vendor may hear of it (a
// caller that cannot record it stops the change there: nothing is sent),
// and Commit inside the transaction that writes the change (the license row
// or its revocation, and its event), so that what the caller keeps of the
// change (its answer) commits with it, or neither does. IntentID is the
// intent that makes the change: a license keeps the one that created it.
// The zero Steps record nothing.
type Steps struct {
	IntentID string
	Started  func(ctx context.Context) error
	Commit   func(tx *gorm.DB, lic License, created bool) error
	// Committed is told, once the transaction that ran Commit committed,
	// that what Commit wrote is kept (a transaction that lost a conflict is
	// run again, and one that failed kept nothing).
	Committed func()
}

func (st Steps) started(ctx context.Context) error {
	if st.Started == nil {
		return nil
	}
	return st.Started(ctx)
}

func (st Steps) commit(tx *gorm.DB, lic License, created bool) error {
	if st.Commit == nil {
		return nil
	}
	return st.Commit(tx, lic, created)
}

func (st Steps) committed() {
	if st.Committed != nil {
		st.Committed()
	}
}

// Create licenses the domain to the consumer; in has passed Validate (the
// HTTP layer binds it once). created is false when the consumer already
// held an active license for the domain, which is returned as it is, with
// no vendor call, unless steps.IntentID is the intent that created it (a
// retry after a crash): that is answered as created, as it first was.
// Another consumer's domain is ErrDomainTaken. Vendor failures come back as
// *UnavailableError, *RejectedError or *UncertainError.
func (s *Service) Create(ctx context.Context, consumerID string, in Input, steps Steps) (lic License, created bool, err error) {
	if lic, err := s.activeFor(ctx, consumerID, in.Domain); err == nil || !errors.Is(err, ErrNotFound) {
		return lic, err == nil && madeBy(lic, steps), err
	}
	if err := steps.started(ctx); err != nil {
		return License{}, false, err
	}
	site, made, err := EnsureSite(ctx, s.vendor, in.Name, in.Domain)
	var uncertain *UncertainError
	if errors.As(err, &uncertain) {
		uncertain.Domain = in.Domain // what the pending intent is known by until a site id is
	}
	if err != nil {
		return License{}, false, err
	}
	event := EventAdopted
	if made {
		event = EventCreated
	}
	lic, created, err = s.record(ctx, consumerID, in, site, event, steps)
	if made && isCallerRefusal(err) {
		s.undoSite(ctx, site)
	}
	if err != nil && !errors.Is(err, ErrDomainTaken) && !isCallerRefusal(err) {
		// The vendor holds the site but it is not recorded here: the outcome is
		// as unknown as a lost answer, and is reconciled the same way.
		return License{}, false, &UncertainError{Err: err, Domain: in.Domain}
	}
	return lic, created, err
}

// nonEmpty is &s, nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// madeBy reports whether lic was created by the intent of steps.
func madeBy(lic License, steps Steps) bool {
	return steps.IntentID != "" && lic.IntentID != nil && *lic.IntentID == steps.IntentID
}

// callerRefusal is how the caller's Commit says it refuses the change for a
// reason of its own (the intent was superseded, its lease lost): the change
// is rolled back and that error answered, not taken as an unknown outcome.
type callerRefusal interface{ CallerRefusal() bool }

func isCallerRefusal(err error) bool {
	var r callerRefusal
	return errors.As(err, &r) && r.CallerRefusal()
}

// ErrMadeByAnother is Resume's answer when the domain's license was made by
// another intent than the one being resumed: that one is moot.
var ErrMadeByAnother error = fault.New("made_by_another", "the license was made by another intent")

// Resume finishes a create whose outcome was unknown. It adopts the vendor's
// site for the domain when there is one; when there is none it creates one
// (listing first, as always) only if mayCreate, and otherwise reports
// found=false. The license is recorded as Create would have. When the
// consumer's license for the domain already exists, it is this intent's
// answer (created) if steps.IntentID made it, and ErrMadeByAnother if
// another intent did.
func (s *Service) Resume(ctx context.Context, consumerID string, in Input, mayCreate bool, steps Steps) (lic License, created, found bool, err error) {
	if in, err = Validate(in); err != nil {
		return License{}, false, false, err
	}
	site, err := s.vendor.FindSite(ctx, in.Domain)
	if err != nil {
		return License{}, false, false, fmt.Errorf("find vendor site: %w", err)
	}
	madeHere := false
	if site == nil {
		if !mayCreate {
			return License{}, false, false, nil
		}
		if err := steps.started(ctx); err != nil { // still the intent's owner, just before the vendor hears of it
			return License{}, false, false, err
		}
		made, createdNow, err := EnsureSite(ctx, s.vendor, in.Name, in.Domain)
		if err != nil {
			return License{}, false, false, err
		}
		site, madeHere = &made, createdNow
	}
	lic, created, err = s.record(ctx, consumerID, in, *site, EventReconciled, steps)
	if madeHere && isCallerRefusal(err) {
		s.undoSite(ctx, *site)
	}
	if err == nil && !created && byAnother(lic, steps) {
		return License{}, false, false, ErrMadeByAnother
	}
	return lic, created || madeBy(lic, steps), err == nil, err
}

// byAnother reports whether lic was created by an intent other than the one
// of steps; a license older than intent ids says nothing.
func byAnother(lic License, steps Steps) bool {
	return steps.IntentID != "" && lic.IntentID != nil && *lic.IntentID != steps.IntentID
}

// undoSite deletes a site this call created for a change its caller then
// refused (the intent was superseded meanwhile): no license will hold it.
// Should the delete fail, the drift check reports the site as an orphan.
func (s *Service) undoSite(ctx context.Context, site Site) {
	_ = s.vendor.DeleteSite(ctx, site.ID)
}

// record writes the license row and its event, in one transaction. The
// unique index on active_domain decides a race: the loser reads the winner's
// row and answers as if it had come second.
func (s *Service) record(ctx context.Context, consumerID string, in Input, site Site, event string, steps Steps) (License, bool, error) {
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
		IntentID:     nonEmpty(steps.IntentID),
		// A creation is always a consumer event (license.created), the first.
		EventSequence: 1,
		CreatedAt:     now,
		UpdatedAt:     now,
	}
	row, err := s.sealed(lic)
	if err != nil {
		return License{}, false, err
	}
	// The event's data rendered and sealed before the transaction: only
	// its INSERT is in it.
	created, err := s.sealEvent(lic, event, now)
	if err != nil {
		return License{}, false, err
	}
	err = s.transact(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		var ce *events.Event
		if created != nil {
			fresh := *created // a fresh row each run: a transaction run again inserts it anew
			ce = &fresh
		}
		if err := s.logSealed(ctx, tx, lic, event, now, ce); err != nil {
			return err
		}
		return steps.commit(tx, lic, true)
	})
	if err == nil {
		steps.committed()
		s.observeCreated()
	}
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
	err := s.read.WithContext(ctx).Where("active_domain = ?", domain).Take(&lic).Error
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
	q := s.read.WithContext(ctx).Model(&License{}).Where("consumer_id = ? AND status IN ?", consumerID, listedStatuses)
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
	q := s.read.WithContext(ctx).Model(&License{}).Where("consumer_id = ? AND status IN ?", consumerID, listedStatuses)
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
	err := s.read.WithContext(ctx).Where("id = ? AND consumer_id = ?", id, consumerID).Take(&lic).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return License{}, ErrNotFound
	}
	if err != nil {
		return License{}, fmt.Errorf("get license: %w", err)
	}
	return lic, nil
}

// Revoke deletes the vendor's site and marks the license revoked, freeing the
// domain. The license is `revoking` before the vendor hears of it, so a
// process that dies mid-call leaves a trace the reconciler finishes
// (ResumeRevoke). Revoking a revoked license does nothing and is no error.
// When the vendor did nothing (unavailable, or it refused), the license is
// active again; when the outcome is unknown it stays revoking and the error
// is an *UncertainError.
func (s *Service) Revoke(ctx context.Context, consumerID, id string, steps Steps) error {
	lic, err := s.find(ctx, consumerID, id)
	if err != nil || lic.Status == StatusRevoked {
		return err
	}
	if err := steps.started(ctx); err != nil {
		return err
	}
	markedHere := false // this call moved it active (or suspended) → revoking, and so may move it back
	before := lic.Status
	if before == StatusActive || before == StatusSuspended {
		now := s.now().UTC().Truncate(time.Microsecond)
		res := s.db.WithContext(ctx).Model(&License{}).Where("id = ? AND status = ?", id, before).
			Updates(map[string]any{"status": StatusRevoking, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("mark license revoking: %w", res.Error)
		}
		markedHere = res.RowsAffected == 1
	}
	err = s.deleteSite(ctx, lic, steps)
	var uncertain *UncertainError
	if err == nil || errors.As(err, &uncertain) || isCallerRefusal(err) {
		return err
	}
	if !markedHere {
		// An earlier attempt marked it revoking and may have reached the
		// vendor: keep the intent for the reconciler rather than reopen it.
		return &UncertainError{Err: err}
	}
	// Nothing happened at the vendor: the license is as it was. If even
	// that cannot be written, the intent is kept and finished later.
	if rerr := s.transition(ctx, lic, StatusRevoking, before, EventFailed); rerr != nil {
		return &UncertainError{Err: errors.Join(err, rerr)}
	}
	return err
}

// ResumeRevoke finishes a revoke whose outcome was unknown, or whose process
// died mid-call: it deletes the site (a site already gone counts as done) and
// marks the license revoked. A license already revoked is done. On a vendor
// error the license stays revoking, for the next attempt.
func (s *Service) ResumeRevoke(ctx context.Context, consumerID, id string, steps Steps) error {
	lic, err := s.find(ctx, consumerID, id)
	if err != nil || lic.Status == StatusRevoked {
		return err
	}
	return s.deleteSite(ctx, lic, steps)
}

// deleteSite asks the vendor to delete the license's site and, once it has,
// marks the license revoked.
func (s *Service) deleteSite(ctx context.Context, lic License, steps Steps) error {
	if err := s.vendor.DeleteSite(ctx, lic.VendorSiteID); err != nil {
		return fmt.Errorf("delete vendor site: %w", err)
	}
	moved, err := s.transitionWith(ctx, lic, "", StatusRevoked, EventRevoked, func(tx *gorm.DB) error { return steps.commit(tx, lic, false) })
	if err == nil && moved {
		steps.committed()
	}
	if isCallerRefusal(err) {
		return err
	}
	if err != nil {
		// The vendor deleted the site and we could not record it: as unknown
		// as a lost answer, and finished the same way (a 404 counts as done).
		return &UncertainError{Err: err}
	}
	return nil
}

// transition moves the license to status (from from, or from any state but
// revoked when from is "") and writes the event, in one transaction.
func (s *Service) transition(ctx context.Context, lic License, from, to, event string) error {
	_, err := s.transitionWith(ctx, lic, from, to, event, nil)
	return err
}

// transitionWith is transition, with also in the transaction (nil: nothing)
// once the license moved; moved says the committed transaction moved it.
func (s *Service) transitionWith(ctx context.Context, lic License, from, to, event string, also func(tx *gorm.DB) error) (moved bool, err error) {
	now := s.now().UTC().Truncate(time.Microsecond)
	set := map[string]any{"status": to, "updated_at": now}
	if to == StatusRevoked {
		set["active_domain"], set["revoked_at"] = nil, now
	}
	if publishes(event) {
		set["event_sequence"] = gorm.Expr("event_sequence + 1")
	}
	err = s.transact(ctx, func(tx *gorm.DB) error {
		moved = false // this run's, not an earlier one's that lost a conflict
		q := tx.Model(&License{}).Where("id = ?", lic.ID)
		if from != "" {
			q = q.Where("status = ?", from)
		} else {
			q = q.Where("status <> ?", StatusRevoked)
		}
		res := q.Updates(set)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error // nothing to move: someone else settled it
		}
		after := lic
		if publishes(event) {
			// The license as this change left it, read in its transaction
			// (which reads its own writes): a key the vendor rotated since
			// lic was read is the one the event carries, with the sequence
			// the UPDATE wrote.
			if err := tx.Where("id = ?", lic.ID).Take(&after).Error; err != nil {
				return fmt.Errorf("read the license %s as changed: %w", lic.ID, err)
			}
			s.openForEvent(ctx, &after) // the event carries the license as the API shows it
		}
		if err := s.logEvent(ctx, tx, after, event, now); err != nil {
			return err
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		moved = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("license %s: %w", to, err)
	}
	return moved, nil
}
