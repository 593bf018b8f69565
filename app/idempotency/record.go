package idempotency

import (
	"time"

	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"
)

// Statuses of a record.
const (
	statusProcessing = "processing" // an owner holds the lease and is executing
	StatusPending    = "pending"    // the outcome is unknown; the reconciler settles it
	StatusCompleted  = "completed"  // the response is stored and replayed
	StatusFailed     = "failed"     // reconciliation gave up; a retry executes again
	// statusAbandoned: nobody was promised anything: the owner went before
	// the vendor could have heard of the intent, or it failed definitely and
	// is kept for its fingerprint. The reconciler never executes it; a retry
	// with its key and the same request runs it for real.
	statusAbandoned = "abandoned"
	// statusSuperseded: a later create for the same subject settled, or the
	// consumer revoked it, while this intent was open. A retry with its key
	// runs for real and answers the truth of its own time.
	statusSuperseded = "superseded"
	// StatusDiscarded: an operator settled it for good (Guard.Discard). A
	// retry with its key is refused (ErrDiscarded) until the key expires.
	StatusDiscarded = "discarded"
)

// Phases of a record: the recovery point its execution reached.
const (
	phaseReserved = "reserved" // on the record; the vendor has not heard of it
	phaseStarted  = "started"  // the work may have reached the vendor (Execution.Start)
	phaseFinished = "finished" // settled, with the local writes of its effect
)

// Statuses are every status, in the order docs/openapi.yaml's IntentStatus
// and the command line list them.
var Statuses = []string{StatusPending, statusProcessing, StatusCompleted, StatusFailed, statusAbandoned, statusSuperseded, StatusDiscarded}

// Record is a row of idempotency_keys: one intent of one consumer.
type Record struct {
	ID          uint64  `gorm:"primaryKey"`
	PublicID    *string // the intent's opaque id (a ULID): what a 202 names
	ConsumerID  string
	Operation   string
	Subject     *string // see Operation.Subject
	Key         string  `gorm:"column:idempotency_key"`
	RequestHash string
	// BodyHash is bodyHash of the request: a retry with the same bytes
	// replays without its body parsed. Nil on records older than it.
	BodyHash        *string
	RequestBody     []byte
	Status          string
	Phase           *string // the recovery point reached; nil on older records (taken as started)
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
	prior           *Record // not stored: the record this execution took over (the same intent)
	sealedErr       error   // not stored: why no key held opens the stored request
}

// TableName implements gorm's Tabler.
func (Record) TableName() string { return "idempotency_keys" }

// BeforeCreate gives every new record its public id.
func (r *Record) BeforeCreate(*gorm.DB) error {
	if r.PublicID == nil {
		id := ulid.Make().String()
		r.PublicID = &id
	}
	return nil
}

// ref is the record's public id, "" for none.
func (r *Record) ref() string { return ptr.Deref(r.PublicID) }

// SystemConsumer is the consumer id an intent of no consumer's (the
// vendor's events) is recorded under: no consumer's id is it (theirs are
// ULIDs). Such an intent shows no consumer.
const SystemConsumer = "vendor"

// scope identifies a record (the unique index).
type scope struct {
	ConsumerID string
	Operation  string
	Key        string
}

func (r *Record) scope() scope {
	return scope{ConsumerID: r.ConsumerID, Operation: r.Operation, Key: r.Key}
}

func (r *Record) expired(now time.Time) bool { return !now.Before(r.ExpiresAt) }

// mayHaveStarted reports whether the work may have reached the vendor: it
// passed Execution.Start, or the record is older than phases.
func (r *Record) mayHaveStarted() bool { return r.Phase == nil || *r.Phase != phaseReserved }

func (r *Record) leaseAlive(now time.Time) bool {
	return r.LockedUntil != nil && now.Before(*r.LockedUntil)
}
