package idempotency

import "time"

// Statuses of a record.
const (
	StatusProcessing = "processing" // an owner holds the lease and is executing
	StatusPending    = "pending"    // the outcome is unknown; the reconciler settles it
	StatusCompleted  = "completed"  // the response is stored and replayed
	StatusFailed     = "failed"     // reconciliation gave up; a retry executes again
)

// Record is a row of idempotency_keys: one intent of one consumer.
type Record struct {
	ID              uint64 `gorm:"primaryKey"`
	ConsumerID      string
	Operation       string
	Key             string `gorm:"column:idempotency_key"`
	RequestHash     string
	RequestBody     []byte
	Status          string
	ResponseStatus  *int
	ResponseHeaders *string // JSON object: Content-Type, Location
	ResponseBody    []byte
	ResourceType    *string
	ResourceID      *string
	ExternalRef     *string
	CorrelationID   *string
	LockedUntil     *time.Time
	Attempts        int
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ExpiresAt       time.Time
}

// TableName is the table the spec names.
func (Record) TableName() string { return "idempotency_keys" }

// Scope identifies a record: unique on (consumer, operation, key).
type Scope struct {
	ConsumerID string
	Operation  string
	Key        string
}

func (r *Record) scope() Scope {
	return Scope{ConsumerID: r.ConsumerID, Operation: r.Operation, Key: r.Key}
}

func (r *Record) expired(now time.Time) bool { return !now.Before(r.ExpiresAt) }

func (r *Record) leaseAlive(now time.Time) bool {
	return r.LockedUntil != nil && now.Before(*r.LockedUntil)
}
