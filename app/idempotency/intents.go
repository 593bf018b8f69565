package idempotency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/ptr"
)

// Intent is a record as an operator or its consumer may see it: never the
// raw key (a digest of it), never the stored request or response body.
type Intent struct {
	ID            string // the public id
	ConsumerID    string // "" for an intent of no consumer's (SystemConsumer)
	Operation     string
	Status        string
	Attempts      int
	KeyDigest     string
	Auto          bool   // the server made the key: the request came without one
	ExternalRef   string // the vendor's reference: a site id, or the domain while none is known
	ResourceType  string
	ResourceID    string
	CorrelationID string     // the request id of the request that made or last took it over
	RequestedBy   string     // the token that asked
	NextAttemptAt *time.Time // when the reconciler is next due to work it (pending, failed)
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Result        *Result // once completed
}

// Result is what a completed intent answered.
type Result struct {
	Status   int
	Location string // for a create, where the resource is
}

// ErrIntentNotFound means no intent (of the consumer asked for) has that id.
var ErrIntentNotFound = errors.New("intent not found")

// ErrNotFailed means a retry was asked of an intent that has not failed.
var ErrNotFailed = errors.New("only a failed intent can be retried")

// intentColumns are the columns an Intent is made of: never the bodies.
var intentColumns = []string{"id", "public_id", "consumer_id", "operation", "idempotency_key", "status",
	"response_status", "response_headers", "resource_type", "resource_id", "external_ref", "correlation_id",
	"requested_by", "locked_until", "attempts", "created_at", "updated_at", "expires_at"}

func (s *Store) intent(r *Record) Intent {
	in := Intent{
		ID: r.ref(), ConsumerID: r.ConsumerID, Operation: r.Operation, Status: r.Status, Attempts: r.Attempts,
		KeyDigest: s.KeyDigest(r.Key), Auto: strings.HasPrefix(r.Key, autoPrefix),
		ExternalRef: ptr.Deref(r.ExternalRef), ResourceType: ptr.Deref(r.ResourceType), ResourceID: ptr.Deref(r.ResourceID),
		CorrelationID: ptr.Deref(r.CorrelationID), RequestedBy: ptr.Deref(r.RequestedBy),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.ConsumerID == SystemConsumer {
		in.ConsumerID = ""
	}
	if r.Status == StatusPending || r.Status == StatusFailed {
		in.NextAttemptAt = r.LockedUntil
	}
	if r.Status == StatusCompleted && r.ResponseStatus != nil {
		in.Result = &Result{Status: *r.ResponseStatus}
		in.Result.Location = storedHeader(r.ResponseHeaders, "Location")
	}
	return in
}

// IntentFilter narrows a list of intents; the zero value lists all.
type IntentFilter struct {
	Status     string    // one status, or "" for all
	ConsumerID string    // one consumer's, or "" for all
	Operation  string    // one operation's, by its exact name (licenses.store), or "" for all
	Before     time.Time // created before this, when not zero
	Page       int       // from 1
	PerPage    int
}

// Intents lists intents, oldest first, and how many match in all.
func (s *Store) Intents(ctx context.Context, f IntentFilter) ([]Intent, int64, error) {
	q := s.db.WithContext(ctx).Model(&Record{})
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.ConsumerID != "" {
		q = q.Where("consumer_id = ?", f.ConsumerID)
	}
	if f.Operation != "" {
		q = q.Where("operation = ?", f.Operation)
	}
	if !f.Before.IsZero() {
		q = q.Where("created_at < ?", f.Before)
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count intents: %w", err)
	}
	page, perPage := max(f.Page, 1), f.PerPage
	if perPage <= 0 {
		perPage = 50
	}
	var recs []Record
	err := q.Select(intentColumns).Order("id").Offset((page - 1) * perPage).Limit(perPage).Find(&recs).Error
	if err != nil {
		return nil, 0, fmt.Errorf("list intents: %w", err)
	}
	out := make([]Intent, len(recs))
	for i := range recs {
		out[i] = s.intent(&recs[i])
	}
	return out, total, nil
}

// Intent returns the intent with that public id, only consumerID's when not
// empty.
func (s *Store) Intent(ctx context.Context, consumerID, id string) (Intent, error) {
	r, err := s.byPublicID(ctx, consumerID, id, intentColumns)
	if err != nil {
		return Intent{}, err
	}
	return s.intent(r), nil
}

// byPublicID reads columns (nil: all) of the intent id, as Intent does.
func (s *Store) byPublicID(ctx context.Context, consumerID, id string, columns []string) (*Record, error) {
	q := s.db.WithContext(ctx).Where("public_id = ?", id)
	if columns != nil {
		q = q.Select(columns)
	}
	if consumerID != "" {
		q = q.Where("consumer_id = ?", consumerID)
	}
	var r Record
	err := q.Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrIntentNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find intent: %w", err)
	}
	return &r, nil
}

// RetryFailed puts a failed intent back to pending, attempts reset, due at
// once, with its intent.retried audit event; else ErrNotFailed.
func (s *Store) RetryFailed(ctx context.Context, by audit.Actor, id string, now time.Time) (Intent, error) {
	set := map[string]any{"status": StatusPending, "attempts": 0, "locked_until": nil, "updated_at": now}
	return s.operatorChange(ctx, by, "retry intent", id, []string{StatusFailed}, nil, set, audit.Change{Event: audit.IntentRetried}, now, ErrNotFailed)
}

// ErrNotDiscardable means a discard was asked of an intent not Discardable.
var ErrNotDiscardable = errors.New("only a failed or abandoned intent can be discarded")

// ErrSubjectBusy (an ErrNotDiscardable) refuses a discard while another
// intent of the operation for the same subject is open: the vendor's site
// for it may be that intent's, which a discard must not delete.
var ErrSubjectBusy = fmt.Errorf("%w: another intent for its subject is open", ErrNotDiscardable)

// ErrRetryOnly means a discard was asked of an intent of a RetryOnly operation.
var ErrRetryOnly = errors.New("this intent can be retried but not discarded")

// Discardable are the statuses an operator may discard in: nobody else is sure to settle them.
var Discardable = []string{StatusFailed, statusAbandoned}

// discard settles an intent in one of the statuses from (or processing
// under lease, when lease is not nil: a discard that claimed it) as
// discarded, with its intent.discarded audit event and reason (audit.Reason's
// rules). The update is conditional on the status, so a reconciler or a
// retry that took the intent over first wins: ErrNotDiscardable. An intent
// of an operation in retryOnly is ErrRetryOnly.
func (s *Store) discard(ctx context.Context, by audit.Actor, id, reason string, now time.Time, from []string, lease *time.Time, retryOnly ...string) (Intent, error) {
	reason, err := audit.Reason(reason)
	if err != nil {
		return Intent{}, err
	}
	set := map[string]any{"status": StatusDiscarded, "phase": phaseFinished, "locked_until": nil, "updated_at": now}
	in, err := s.operatorChange(ctx, by, "discard intent", id, from, lease, set, audit.Change{Event: audit.IntentDiscarded, Reason: reason}, now, ErrNotDiscardable, retryOnly...)
	if errors.Is(err, ErrNotDiscardable) && slices.Contains(retryOnly, in.Operation) {
		err = ErrRetryOnly
	}
	return in, err
}

// operatorChange applies set to the intent id if it is in one of from (under
// lease, when not nil) with change, and returns it afterwards (refused: not).
func (s *Store) operatorChange(ctx context.Context, by audit.Actor, what, id string, from []string, lease *time.Time, set map[string]any,
	change audit.Change, now time.Time, refused error, exceptOperations ...string) (Intent, error) {
	if err := by.Check(); err != nil {
		return Intent{}, err
	}
	change.SubjectType, change.SubjectID = audit.SubjectIntent, id
	changed := false
	err := database.Transact(ctx, s.db, database.RetryOnConflict, func(tx *gorm.DB) error {
		q := tx.Model(&Record{}).Where("public_id = ? AND status IN ?", id, from)
		if lease != nil {
			q = q.Where("locked_until = ?", *lease)
		}
		if len(exceptOperations) > 0 {
			q = q.Where("operation NOT IN ?", exceptOperations)
		}
		res := q.Updates(set)
		if res.Error != nil {
			return fmt.Errorf("%s: %w", what, res.Error)
		}
		if changed = res.RowsAffected == 1; !changed {
			return nil
		}
		return audit.Record(tx, by, change, now)
	})
	if err != nil {
		return Intent{}, err
	}
	in, err := s.Intent(ctx, "", id)
	if err != nil || changed {
		return in, err
	}
	return in, refused
}

// IntentEvents returns the audit trail of the intent with that public id,
// oldest first, and its consumer's id ("" once the intent is pruned: the
// trail outlives it). ErrIntentNotFound when neither is on record.
func (s *Store) IntentEvents(ctx context.Context, id string) ([]audit.Event, string, error) {
	consumerID := ""
	r, err := s.byPublicID(ctx, "", id, intentColumns)
	switch {
	case err == nil:
		consumerID = r.ConsumerID
	case !errors.Is(err, ErrIntentNotFound):
		return nil, "", err
	}
	events, _, err := audit.List(ctx, s.db, audit.Filter{SubjectType: audit.SubjectIntent, SubjectID: id})
	if err != nil {
		return nil, "", err
	}
	if r == nil && len(events) == 0 {
		return nil, "", ErrIntentNotFound
	}
	return events, consumerID, nil
}

// Backlog is what an operator watches of the intents (the metrics, the
// console's dashboard): how many are pending and when the oldest of them
// was created (zero for none), and how many have failed.
func (s *Store) Backlog(ctx context.Context) (pending int64, oldestPending time.Time, failed int64, err error) {
	var rows []struct {
		Status string
		N      int64
	}
	err = s.db.WithContext(ctx).Model(&Record{}).Select("status, COUNT(*) AS n").
		Where("status IN ?", []string{StatusPending, StatusFailed}).Group("status").Scan(&rows).Error
	if err != nil {
		return 0, time.Time{}, 0, fmt.Errorf("count pending and failed intents: %w", err)
	}
	for _, r := range rows {
		switch r.Status {
		case StatusPending:
			pending = r.N
		case StatusFailed:
			failed = r.N
		}
	}
	// The oldest row's own column, not MIN(): SQLite returns an aggregate
	// of a DATETIME column as text.
	var created []time.Time
	err = s.db.WithContext(ctx).Model(&Record{}).Where("status = ?", StatusPending).Order("created_at").Limit(1).Pluck("created_at", &created).Error
	if err != nil {
		return 0, time.Time{}, 0, fmt.Errorf("oldest pending record: %w", err)
	}
	if len(created) > 0 {
		oldestPending = created[0]
	}
	return pending, oldestPending, failed, nil
}

// StatusCounts returns how many intents are in each of Statuses (zero
// included): one GROUP BY, which the status index serves.
func (s *Store) StatusCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string
		N      int64
	}
	err := s.db.WithContext(ctx).Model(&Record{}).Select("status, COUNT(*) AS n").Group("status").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count intents by status: %w", err)
	}
	counts := make(map[string]int64, len(Statuses))
	for _, st := range Statuses {
		counts[st] = 0
	}
	for _, r := range rows {
		counts[r.Status] = r.N
	}
	return counts, nil
}

// Discard settles a failed or abandoned intent for good, for reason, after
// its operation's BeforeDiscard, when its work may have reached the vendor.
// Meanwhile the intent is claimed (put back as it was if the check fails),
// so that neither a retry nor the reconciler runs it between the check and
// the discard, and marked never started: a crash then leaves an intent the
// reconciler abandons, rather than resume the create the discard was meant
// to end (a site left behind is one no license holds: drift reports it).
func (g *Guard) Discard(ctx context.Context, by audit.Actor, id, reason string) (Intent, error) {
	s, retryOnly := g.cfg.Store, g.cfg.Operations.RetryOnly()
	if _, err := audit.Reason(reason); err != nil {
		return Intent{}, err
	}
	rec, err := s.discardable(ctx, id)
	if err != nil {
		return Intent{}, err
	}
	op, _ := g.cfg.Operations.lookup(rec.Operation)
	check := op.beforeDiscard
	if check == nil || !rec.mayHaveStarted() || !slices.Contains(Discardable, rec.Status) || slices.Contains(retryOnly, rec.Operation) {
		return s.discard(ctx, by, id, reason, g.now(), Discardable, nil, retryOnly...)
	}
	if err := by.Check(); err != nil {
		return Intent{}, err
	}
	busy, err := s.subjectBusy(ctx, rec)
	if err != nil {
		return Intent{}, err
	}
	if busy {
		return Intent{}, ErrSubjectBusy
	}
	now := g.now()
	lease := now.Add(g.cfg.LockTimeout)
	won, err := s.claimForDiscard(ctx, rec, lease, now)
	if err != nil {
		return Intent{}, err
	}
	if !won { // taken over, or changed, since it was read
		in, err := s.Intent(ctx, "", id)
		if err != nil {
			return Intent{}, err
		}
		return in, ErrNotDiscardable
	}
	work, cancel := detach(ctx, workDeadline(lease, now, g.cfg.LockTimeout))
	defer cancel()
	if err := check(work, rec); err != nil {
		g.putBack(ctx, rec, lease)
		return Intent{}, err
	}
	in, err := s.discard(ctx, by, id, reason, g.now(), []string{statusProcessing}, &lease, retryOnly...)
	if err != nil { // the discard and its event did not commit: the intent is as it was
		g.putBack(ctx, rec, lease)
	}
	return in, err
}

// putBack gives back, as it was, an intent Discard claimed and did not
// discard; one whose claim was lost meanwhile is its new owner's.
func (g *Guard) putBack(ctx context.Context, rec *Record, lease time.Time) {
	put, cancel := settleContext(ctx)
	defer cancel()
	if err := g.cfg.Store.unclaim(put, rec, lease); err != nil && !errors.Is(err, ErrLeaseLost) {
		g.cfg.Log.Error("put back an intent whose discard failed", "intent", rec.ref(), "error", err)
	}
}

// subjectBusy reports whether another intent of read's operation for its
// subject, of any consumer, is pending or processing.
func (s *Store) subjectBusy(ctx context.Context, read *Record) (bool, error) {
	if read.Subject == nil {
		return false, nil
	}
	var n int64
	err := s.db.WithContext(ctx).Model(&Record{}).Where("operation = ? AND subject = ? AND id <> ? AND status IN ?",
		read.Operation, *read.Subject, read.ID, []string{StatusPending, statusProcessing}).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("find the open intents of the subject: %w", err)
	}
	return n > 0, nil
}

// discardable reads the whole intent id, its stored request opened.
func (s *Store) discardable(ctx context.Context, id string) (*Record, error) {
	r, err := s.byPublicID(ctx, "", id, nil)
	if err != nil {
		return nil, err
	}
	if err := s.open(&r.RequestBody, "request", r.ID); err != nil {
		r.RequestBody, r.sealedErr = nil, err
	}
	return r, nil
}

// claimForDiscard makes read processing under lease, if it is as read.
func (s *Store) claimForDiscard(ctx context.Context, read *Record, lease, now time.Time) (bool, error) {
	return s.casUpdate(ctx, "claim intent for discard", read,
		map[string]any{"status": statusProcessing, "phase": phaseReserved, "locked_until": lease, "updated_at": now})
}

// unclaim undoes claimForDiscard while the claim under lease is held.
func (s *Store) unclaim(ctx context.Context, read *Record, lease time.Time) error {
	res := database.RetryOnConflict(ctx, func() *gorm.DB {
		return leaseHeld(s.db.WithContext(ctx).Model(&Record{}), read, statusProcessing, &lease).
			Updates(map[string]any{"status": read.Status, "phase": read.Phase, "locked_until": read.LockedUntil, "updated_at": read.UpdatedAt})
	})
	if res.Error != nil {
		return fmt.Errorf("put back intent: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return ErrLeaseLost
	}
	return nil
}
