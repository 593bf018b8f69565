package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
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

// Result is what a completed intent answered: its status and, for a
// create, where the resource is.
type Result struct {
	Status   int
	Location string
}

// ErrIntentNotFound means no intent has that id (or, asked on a consumer's
// behalf, none of that consumer's).
var ErrIntentNotFound = errors.New("intent not found")

// ErrNotFailed means a retry was asked of an intent that has not failed.
var ErrNotFailed = errors.New("only a failed intent can be retried")

// intentColumns are the columns an Intent is made of: the bodies and the
// raw key's neighbours are never read for it.
var intentColumns = []string{"id", "public_id", "consumer_id", "operation", "idempotency_key", "status",
	"response_status", "response_headers", "resource_type", "resource_id", "external_ref", "correlation_id",
	"requested_by", "locked_until", "attempts", "created_at", "updated_at", "expires_at"}

// intent is what the record shows of itself.
func (s *Store) intent(r *Record) Intent {
	in := Intent{
		ID: r.Ref(), ConsumerID: r.ConsumerID, Operation: r.Operation, Status: r.Status, Attempts: r.Attempts,
		KeyDigest: s.KeyDigest(r.Key), Auto: strings.HasPrefix(r.Key, autoPrefix),
		ExternalRef: deref(r.ExternalRef), ResourceType: deref(r.ResourceType), ResourceID: deref(r.ResourceID),
		CorrelationID: deref(r.CorrelationID), RequestedBy: deref(r.RequestedBy),
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

// Intent returns the intent with that public id; when consumerID is not
// empty, only if it is that consumer's. ErrIntentNotFound otherwise.
func (s *Store) Intent(ctx context.Context, consumerID, id string) (Intent, error) {
	r, err := s.byPublicID(ctx, consumerID, id)
	if err != nil {
		return Intent{}, err
	}
	return s.intent(r), nil
}

func (s *Store) byPublicID(ctx context.Context, consumerID, id string) (*Record, error) {
	q := s.db.WithContext(ctx).Select(intentColumns).Where("public_id = ?", id)
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

// RetryFailed puts a failed intent back to pending, its attempts reset, due
// for the reconciler at once. ErrNotFailed when it is in another state.
func (s *Store) RetryFailed(ctx context.Context, id string, now time.Time) (Intent, error) {
	res := database.RetryOnConflict(ctx, func() *gorm.DB {
		return s.db.WithContext(ctx).Model(&Record{}).Where("public_id = ? AND status = ?", id, StatusFailed).
			Updates(map[string]any{"status": StatusPending, "attempts": 0, "locked_until": nil, "updated_at": now})
	})
	if res.Error != nil {
		return Intent{}, fmt.Errorf("retry intent: %w", res.Error)
	}
	r, err := s.byPublicID(ctx, "", id)
	if err != nil {
		return Intent{}, err
	}
	if res.RowsAffected == 0 {
		return s.intent(r), ErrNotFailed
	}
	return s.intent(r), nil
}

// FailedCount returns how many intents have failed and wait for the slow
// retry or an operator.
func (s *Store) FailedCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&Record{}).Where("status = ?", StatusFailed).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count failed intents: %w", err)
	}
	return n, nil
}
