package resource

import (
	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/app/idempotency"
)

// Operation is an intent as its consumer sees it (GET /api/operations/{id},
// and the start of every Intent).
type Operation struct {
	ID        string  `json:"id"`
	Operation string  `json:"operation"`
	Status    string  `json:"status"`
	Attempts  int     `json:"attempts"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
	Result    *Result `json:"result,omitempty"` // absent until the intent is completed
}

// Result is what a completed intent answered: its status and, for a
// create, where the license is (absent otherwise).
type Result struct {
	Status   int    `json:"status"`
	Location string `json:"location,omitempty"`
}

// NewOperation is the consumer's view of in.
func NewOperation(in idempotency.Intent) Operation {
	o := Operation{
		ID: in.ID, Operation: in.Operation, Status: in.Status, Attempts: in.Attempts,
		CreatedAt: events.Time(in.CreatedAt), UpdatedAt: events.Time(in.UpdatedAt),
	}
	if in.Result != nil {
		o.Result = &Result{Status: in.Result.Status, Location: in.Result.Location}
	}
	return o
}

// Where an intent's key came from (Intent.KeySource).
const (
	KeySourceClient = "client" // the consumer's Idempotency-Key, or the license id of a revoke
	KeySourceServer = "server" // the server made it: a create sent without a key
)

// Intent is an intent as an operator sees it (GET /api/intents, and
// `licensor intents list|show --json`): a digest of the key, never the key,
// a token or a stored body. A nil pointer is an empty field, JSON null.
type Intent struct {
	Operation
	Consumer      *string `json:"consumer"`    // the consumer's name; null for an intent of no consumer's (a vendor event)
	ConsumerID    *string `json:"consumer_id"` // null for an intent of no consumer's
	KeyDigest     string  `json:"key_digest"`
	KeySource     string  `json:"key_source"` // KeySourceClient or KeySourceServer
	ExternalRef   *string `json:"external_ref"`
	ResourceType  *string `json:"resource_type"`
	ResourceID    *string `json:"resource_id"`
	RequestID     *string `json:"request_id"`
	TokenID       *string `json:"token_id"`
	NextAttemptAt *string `json:"next_attempt_at"`
}

// NewIntent is the operator's view of in, whose consumer is named
// consumerName; an intent of no consumer's (in.ConsumerID "") shows null
// for both.
func NewIntent(in idempotency.Intent, consumerName string) Intent {
	source := KeySourceClient
	if in.Auto {
		source = KeySourceServer
	}
	v := Intent{
		Operation: NewOperation(in),
		KeyDigest: in.KeyDigest, KeySource: source,
		ExternalRef: StringOrNil(in.ExternalRef), ResourceType: StringOrNil(in.ResourceType),
		ResourceID: StringOrNil(in.ResourceID), RequestID: StringOrNil(in.CorrelationID),
		TokenID: StringOrNil(in.RequestedBy), NextAttemptAt: TimeOrNil(in.NextAttemptAt),
	}
	if in.ConsumerID != "" {
		v.Consumer, v.ConsumerID = &consumerName, &in.ConsumerID
	}
	return v
}

// NewIntents is the operator's view of intents, consumerNames id → name.
func NewIntents(intents []idempotency.Intent, consumerNames map[string]string) []Intent {
	return list(intents, func(in idempotency.Intent) Intent { return NewIntent(in, consumerNames[in.ConsumerID]) })
}
