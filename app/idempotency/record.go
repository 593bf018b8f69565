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
	// StatusAbandoned: nobody was promised anything and nobody will finish
	// it: the owner went (died, or its client was told 503) before the
	// vendor could have heard of the intent, or its attempt ended in a
	// definite failure (a 503 vendor_unavailable, a 409 domain_taken, a 422
	// vendor_rejected) and it is kept until it expires for its fingerprint.
	// The reconciler never executes it; a retry with its key and the same
	// request runs it for real, another request is ErrKeyReused.
	StatusAbandoned = "abandoned"
	// StatusSuperseded: a later create of the same consumer for the same
	// subject settled, or the consumer revoked it, while this intent was
	// open; the reconciler never executes it. A retry with its key runs for
	// real and answers the truth of its own time (200 for a license the
	// consumer holds).
	StatusSuperseded = "superseded"
	// StatusDiscarded: an operator settled a failed or abandoned intent for
	// good (Store.Discard), with a reason in the audit trail. It is closed:
	// never executed, never superseded again, and a retry with its key is
	// refused (ErrDiscarded) until the key expires.
	StatusDiscarded = "discarded"
)

// Phases of a record: the recovery point its execution reached, each
// written with the local writes that belong to it.
const (
	PhaseReserved = "reserved" // on the record; the vendor has not heard of it
	PhaseStarted  = "started"  // the work may have reached the vendor (Execution.Start)
	PhaseFinished = "finished" // settled, with the local writes of its effect
)

// Statuses are every status a record may be in, in the one order the API
// documents them (docs/openapi.yaml's IntentStatus) and the command line
// lists them.
var Statuses = []string{StatusPending, StatusProcessing, StatusCompleted, StatusFailed, StatusAbandoned, StatusSuperseded, StatusDiscarded}

// Record is a row of idempotency_keys: one intent of one consumer.
type Record struct {
	ID uint64 `gorm:"primaryKey"`
	// PublicID is the intent's opaque id (a ULID): what a 202 names and an
	// operator looks it up by. Never the raw key.
	PublicID   *string
	ConsumerID string
	Operation  string
	// Subject is what the intent is about within its consumer (a create:
	// its domain): a later settled intent for it supersedes this one.
	Subject     *string
	Key         string `gorm:"column:idempotency_key"`
	RequestHash string
	// BodyHash is the SHA-256 of the request's method, route and raw body
	// bytes (see bodyHash): a retry with the same bytes replays without its
	// body parsed. Nil on records older than it.
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
	// prior is the record as it was when this execution took it over (not
	// expired: the same intent), nil for a fresh reservation; not stored.
	prior *Record
	// sealedErr says why the stored request could not be opened (no key of
	// APP_KEY and APP_PREVIOUS_KEYS does); not stored.
	sealedErr error
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SystemConsumer is the consumer id an intent that belongs to no consumer
// is recorded under (the vendor's events): beside the consumers' intents,
// never among them, as no consumer's id is it (theirs are ULIDs). Such an
// intent shows no consumer (Intent.ConsumerID is "").
const SystemConsumer = "vendor"

// scope identifies a record: unique on (consumer, operation, key).
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
func (r *Record) mayHaveStarted() bool { return r.Phase == nil || *r.Phase != PhaseReserved }

func (r *Record) leaseAlive(now time.Time) bool {
	return r.LockedUntil != nil && now.Before(*r.LockedUntil)
}
