package idempotency

import (
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"
)

// Statuses of a record.
const (
	StatusProcessing = "processing" // an owner holds the lease and is executing
	StatusPending    = "pending"    // the outcome is unknown; the reconciler settles it
	StatusCompleted  = "completed"  // the response is stored and replayed
	StatusFailed     = "failed"     // reconciliation gave up; a retry executes again
)

// Statuses are every status a record may be in, in the one order the API
// documents them (docs/openapi.yaml's IntentStatus) and the command line
// lists them.
var Statuses = []string{StatusPending, StatusProcessing, StatusCompleted, StatusFailed}

// Record is a row of idempotency_keys: one intent of one consumer.
type Record struct {
	ID uint64 `gorm:"primaryKey"`
	// PublicID is the intent's opaque id (a ULID): what a 202 names and an
	// operator looks it up by. Never the raw key.
	PublicID    *string
	ConsumerID  string
	Operation   string
	Key         string `gorm:"column:idempotency_key"`
	RequestHash string
	// BodyHash is the SHA-256 of the request's method, route and raw body
	// bytes (see bodyHash): a retry with the same bytes replays without its
	// body parsed. Nil on records older than it.
	BodyHash        *string
	RequestBody     []byte
	Status          string
	ResponseStatus  *int
	ResponseHeaders *string // "Name: value" lines (see encodeHeaders); a JSON object on older records
	ResponseBody    []byte
	ResourceType    *string
	ResourceID      *string
	ExternalRef     *string
	CorrelationID   *string
	RequestedBy     *string // the token that asked, when there was one
	LockedUntil     *time.Time
	Attempts        int
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ExpiresAt       time.Time
}

// TableName is the table the records live in.
func (Record) TableName() string { return "idempotency_keys" }

// BeforeCreate gives every new record its public id.
func (r *Record) BeforeCreate(*gorm.DB) error {
	if r.PublicID == nil {
		id := ulid.Make().String()
		r.PublicID = &id
	}
	return nil
}

// Ref is the record's public id, "" for none.
func (r *Record) Ref() string { return deref(r.PublicID) }

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
