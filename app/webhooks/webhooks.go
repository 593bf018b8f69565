// Package webhooks delivers the consumer events (app/events) to the
// consumers' webhook endpoints, at least once.
//
// The events are the outbox: each is written in the transaction of its
// change. The dispatcher (Dispatch) numbers the committed events for the
// feed and, in the same transaction, owes each to the consumer's enabled
// endpoints that take its type: one delivery row per endpoint. Workers in
// every replica claim due deliveries under a lease, POST the event signed
// with the endpoint's secret, and record each attempt; a 2xx is delivered,
// anything else is retried with exponential backoff and jitter until the
// retry window ends. A worker that dies mid-delivery leaves its claim to
// lapse, and the delivery is sent again: the receiver drops duplicates by
// the event's id.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/fault"
)

// The statuses of a delivery.
const (
	StatusPending   = "pending"   // owed: due at next_attempt_at
	StatusDelivered = "delivered" // the endpoint answered 2xx
	StatusFailed    = "failed"    // retried for the whole retry window, never delivered
)

// Statuses are every delivery status.
var Statuses = []string{StatusPending, StatusDelivered, StatusFailed}

// Endpoint is a consumer's webhook endpoint as its row stores it.
type Endpoint struct {
	ID          string `gorm:"primaryKey"`
	ConsumerID  string
	URL         string
	Description string
	// Events is the JSON array of the event types the endpoint takes
	// (events.LicenseWildcard for every license event).
	Events string
	// Secret signs what is sent to the endpoint, sealed under APP_KEY.
	Secret  string
	Enabled bool
	// FailingSince is when the endpoint's deliveries began to fail with
	// none delivered since; nil while it answers.
	FailingSince   *time.Time
	DisabledAt     *time.Time
	DisabledReason *string
	// EventSequence is the sequence of the endpoint's last event.
	EventSequence uint64
	// LastClaimedAt is when a worker last claimed one of its deliveries:
	// the endpoint served longest ago is claimed for first.
	LastClaimedAt *time.Time
	// ConsecutiveTimeouts counts its attempts in a row that got no answer
	// within the timeout; from breakerAfter on, the endpoint is paused as a
	// whole until PausedUntil (nil: not paused).
	ConsecutiveTimeouts int
	PausedUntil         *time.Time
	// RetriedAt is when its consumer last retried one of its deliveries.
	RetriedAt *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TableName is the table endpoints live in.
func (Endpoint) TableName() string { return "webhook_endpoints" }

// Types are the event types (or patterns) the endpoint takes.
func (e Endpoint) Types() []string {
	var types []string
	_ = json.Unmarshal([]byte(e.Events), &types) // written by this package only, from a []string
	return types
}

// EndpointResource is an endpoint as the API shows it (never its secret),
// and as a webhook_endpoint.disabled event carries it.
type EndpointResource struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	Description    string   `json:"description"`
	Events         []string `json:"events"`
	Enabled        bool     `json:"enabled"`
	DisabledAt     *string  `json:"disabled_at"`
	DisabledReason *string  `json:"disabled_reason"`
	CreatedAt      string   `json:"created_at"`
	UpdatedAt      string   `json:"updated_at"`
}

// Resource is e as the API shows it.
func (e Endpoint) Resource() EndpointResource {
	r := EndpointResource{ID: e.ID, URL: e.URL, Description: e.Description, Events: e.Types(), Enabled: e.Enabled,
		DisabledReason: e.DisabledReason, CreatedAt: events.Time(e.CreatedAt), UpdatedAt: events.Time(e.UpdatedAt)}
	if r.Events == nil {
		r.Events = []string{}
	}
	if e.DisabledAt != nil {
		s := events.Time(*e.DisabledAt)
		r.DisabledAt = &s
	}
	return r
}

// Delivery is one event owed to one endpoint, as its row stores it.
type Delivery struct {
	ID         string `gorm:"primaryKey"`
	EndpointID string
	EventID    uint64 // the event's row id (events.Event.Seq)
	ConsumerID string
	Status     string
	Attempts   int
	// NextAttemptAt is when a pending delivery is due (a claimed one: when
	// its claim lapses); nil once it is settled, and while its endpoint is
	// disabled (parked: due again when it is enabled).
	NextAttemptAt *time.Time
	// Claim is the lease of the worker sending it, nil when none holds it.
	Claim *string
	// WindowStart starts the retry window: the delivery is retried until
	// WindowStart + WEBHOOK_RETRY_FOR (a manual retry starts a new one).
	WindowStart time.Time
	LastStatus  *int // the status of the last attempt's answer; nil: none yet, or no answer
	DeliveredAt *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// TableName is the table deliveries live in.
func (Delivery) TableName() string { return "webhook_deliveries" }

// Attempt is one attempt at a delivery.
type Attempt struct {
	ID             uint64 `gorm:"primaryKey"`
	DeliveryID     string
	AttemptedAt    time.Time
	ResponseStatus *int    // nil: no answer (refused, timed out, not allowed)
	DurationMS     int64   `gorm:"column:duration_ms"`
	Error          *string // why it failed, one of Failures; nil: delivered
}

// TableName is the table attempts live in.
func (Attempt) TableName() string { return "webhook_attempts" }

// Cipher seals the endpoints' secrets at rest (app/crypt's *Cipher).
type Cipher interface {
	Encrypt(plain []byte) (string, error)
	Decrypt(envelope string) ([]byte, error)
}

// Config is what a Service needs.
type Config struct {
	DB   *gorm.DB
	Read *gorm.DB // nil: DB
	// Events is the consumer events the deliveries carry.
	Events *events.Log
	Cipher Cipher
	Policy Policy
	// Timeout bounds one attempt (WEBHOOK_TIMEOUT).
	Timeout time.Duration
	// RetryBase is the first wait after a failed attempt, doubling with each
	// (WEBHOOK_RETRY_BASE).
	RetryBase time.Duration
	// RetryFor is the retry window of a delivery, and how long an endpoint
	// may fail every delivery before it is disabled (WEBHOOK_RETRY_FOR).
	RetryFor time.Duration
	// Interval is how often Run dispatches, and looks for due deliveries
	// when no attempt ended meanwhile (WEBHOOK_POLL_INTERVAL).
	Interval time.Duration
	// EndpointConcurrency is how many attempts may be in flight to one
	// endpoint at once, across replicas (WEBHOOK_ENDPOINT_CONCURRENCY).
	EndpointConcurrency int
	// UserAgent is sent with every delivery ("licensor/<version>").
	UserAgent string
	// Retry runs a statement again while it loses a lock conflict
	// (database.RetryOnConflict); nil runs it once.
	Retry func(ctx context.Context, stmt func() *gorm.DB) *gorm.DB
	Now   func() time.Time
	Log   *slog.Logger
	// Observe counts each settled attempt by outcome ("delivered",
	// "retried", "failed"); nil counts nothing.
	Observe func(outcome string)
	// Transport, when set, carries the deliveries instead of the policy's
	// dialer: a deterministic simulation's endpoints, in process (the
	// policy still checks the URLs endpoints are registered with).
	Transport http.RoundTripper
	// Jitter is the random part of a retry's backoff, below max (nil:
	// uniform random).
	Jitter func(max time.Duration) time.Duration
}

// Service manages endpoints and delivers events to them.
type Service struct {
	cfg    Config
	db     *gorm.DB
	read   *gorm.DB
	client *http.Client // the deliveries': Policy.Client(Timeout), built once
}

// New returns a Service. It panics without Events or a Cipher.
func New(cfg Config) *Service {
	if cfg.Events == nil || cfg.Cipher == nil {
		panic("webhooks: New needs Events and a Cipher")
	}
	if cfg.Read == nil {
		cfg.Read = cfg.DB
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 30 * time.Second
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = 72 * time.Hour
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.EndpointConcurrency <= 0 {
		cfg.EndpointConcurrency = 1
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "licensor"
	}
	if cfg.Retry == nil {
		cfg.Retry = func(_ context.Context, stmt func() *gorm.DB) *gorm.DB { return stmt() }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string) {}
	}
	client := cfg.Policy.Client(cfg.Timeout)
	if cfg.Transport != nil {
		client.Transport = cfg.Transport
	}
	return &Service{cfg: cfg, db: cfg.DB, read: cfg.Read, client: client}
}

// now is the service's clock, in the precision the tables keep.
func (s *Service) now() time.Time { return dbtime.Stamp(s.cfg.Now()) }

// ErrNotFound is an endpoint or a delivery the caller has none under.
var ErrNotFound error = fault.New("webhook_not_found", "not found")

// take reads the row of T with id, narrowed as where narrows; none is
// ErrNotFound, naming what was not found.
func take[T any](db *gorm.DB, what, id string, narrow ...string) (T, error) {
	var row T
	err := where(db.Where("id = ?", id), narrow...).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, fmt.Errorf("%s %w", what, ErrNotFound)
	}
	if err != nil {
		return row, fmt.Errorf("get %s: %w", what, err)
	}
	return row, nil
}

// where narrows q by each pair of a column and a value, but for the pairs
// whose value is "" (all of them).
func where(q *gorm.DB, pairs ...string) *gorm.DB {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q = q.Where(pairs[i]+" = ?", pairs[i+1])
		}
	}
	return q
}
