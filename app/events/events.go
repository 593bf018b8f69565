// Package events is the consumer events: what happened to a consumer's
// licenses (and to its webhook endpoints), written as an outbox row in the
// same transaction as the change itself, read back as the feed
// (GET /api/events) and delivered to the consumer's webhook endpoints.
//
// An appended row is not in the feed yet: the dispatcher (app/webhooks) numbers
// committed events one batch at a time, whichever replica runs it, and hands
// each to the consumer's endpoints in the same transaction. The feed is read
// in that order, so a reader resuming after an event never misses one that
// committed late under a lower id.
package events

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/fault"
)

// The types of consumer events.
const (
	LicenseCreated     = "license.created"           // a license was made (or the vendor's site for the domain adopted)
	LicenseRevoked     = "license.revoked"           // revoked by the consumer, or its site deleted at the vendor
	LicenseSuspended   = "license.suspended"         // its site suspended at the vendor
	LicenseReactivated = "license.reactivated"       // its site reactivated at the vendor
	LicenseKeyRotated  = "license.key_rotated"       // its license key replaced at the vendor
	EndpointDisabled   = "webhook_endpoint.disabled" // failed every delivery for WEBHOOK_RETRY_FOR
)

// LicenseTypes are the types of the license events.
var LicenseTypes = []string{LicenseCreated, LicenseRevoked, LicenseSuspended, LicenseReactivated, LicenseKeyRotated}

// Types are every event type, in the order the docs list them.
var Types = append(slices.Clone(LicenseTypes), EndpointDisabled)

// LicenseWildcard subscribes an endpoint to every license event.
const LicenseWildcard = "license.*"

// IsType reports whether t is an event type.
func IsType(t string) bool { return slices.Contains(Types, t) }

// Matches reports whether an endpoint subscribed to patterns (types, or
// LicenseWildcard) takes events of type t.
func Matches(patterns []string, t string) bool {
	for _, p := range patterns {
		if p == t || (p == LicenseWildcard && strings.HasPrefix(t, "license.")) {
			return true
		}
	}
	return false
}

// IDPrefix starts every event's public id.
const IDPrefix = "evt_"

// Event is one consumer event as its row stores it.
type Event struct {
	Seq        uint64 `gorm:"column:id;primaryKey"` // the order events were written in, not the feed's
	ID         string `gorm:"column:public_id"`     // "evt_" + a ULID: what the API shows
	ConsumerID string
	Type       string
	SubjectID  string  // the license's id (or the webhook endpoint's)
	Sequence   uint64  // one per event of one subject, from 1
	Data       string  // the "data" object as JSON, sealed under APP_KEY
	Position   *uint64 // the place in the feed; nil until dispatched
	CreatedAt  time.Time
}

// TableName is the table events live in.
func (Event) TableName() string { return "consumer_events" }

// Cipher seals the events' data at rest: a license's data carries its key.
type Cipher interface {
	Encrypt(plain []byte) (string, error)
	Decrypt(envelope string) ([]byte, error)
}

// Log appends and reads consumer events (app/webhooks prunes them, with
// their deliveries).
type Log struct {
	db     *gorm.DB
	read   *gorm.DB
	cipher Cipher
}

// New returns a Log writing to db and reading from read (nil: db).
func New(db, read *gorm.DB, cipher Cipher) *Log {
	if cipher == nil {
		panic("events: New needs a Cipher")
	}
	return &Log{db: db, read: cmp.Or(read, db), cipher: cipher}
}

// Draft is an event to append.
type Draft struct {
	ConsumerID string
	Type       string
	SubjectID  string
	Sequence   uint64
	Data       any // the "data" object: {"license": …} or {"webhook_endpoint": …}
	At         time.Time
}

// Append writes the event within tx, the transaction of the change it
// describes: Seal, then Insert.
func (l *Log) Append(tx *gorm.DB, d Draft) error {
	e, err := l.Seal(d)
	if err != nil {
		return err
	}
	return l.Insert(tx, &e)
}

// Seal is the event's row, its data sealed, ready to Insert: the work a
// change may do before it opens its transaction.
func (l *Log) Seal(d Draft) (Event, error) {
	if !IsType(d.Type) {
		return Event{}, fmt.Errorf("events: unknown type %q", d.Type)
	}
	plain, err := marshal(d.Data)
	if err != nil {
		return Event{}, fmt.Errorf("encode event data: %w", err)
	}
	sealed, err := l.cipher.Encrypt(plain)
	if err != nil {
		return Event{}, fmt.Errorf("encrypt event data: %w", err)
	}
	return Event{ID: IDPrefix + ulid.Make().String(), ConsumerID: d.ConsumerID, Type: d.Type, SubjectID: d.SubjectID,
		Sequence: d.Sequence, Data: sealed, CreatedAt: dbtime.Stamp(d.At)}, nil
}

// Insert writes a sealed event within tx: one plain INSERT (GORM's Create,
// which reads the new id back, cost a SQLite create a tenth of its
// throughput).
func (l *Log) Insert(tx *gorm.DB, e *Event) error {
	err := tx.Exec("INSERT INTO consumer_events (public_id, consumer_id, type, subject_id, sequence, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
		e.ID, e.ConsumerID, e.Type, e.SubjectID, e.Sequence, e.Data, e.CreatedAt).Error
	if err != nil {
		return fmt.Errorf("record consumer event: %w", err)
	}
	return nil
}

// marshal is json.Marshal without HTML escaping, as every body the API
// writes ("AT&T", not "AT\u0026T").
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Body is the event as the feed lists it and a webhook sends it. The same
// event renders the same bytes every time, so every attempt at a delivery
// signs the same body.
func (l *Log) Body(e Event) (json.RawMessage, error) {
	data, err := l.cipher.Decrypt(e.Data)
	if err != nil {
		return nil, fmt.Errorf("decrypt the data of event %s: %w", e.ID, err)
	}
	return marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		CreatedAt string          `json:"created_at"`
		Data      json.RawMessage `json:"data"`
		Sequence  uint64          `json:"sequence"`
	}{e.ID, e.Type, Time(e.CreatedAt), data, e.Sequence})
}

// ErrNotFound is an event id the consumer has no event under.
var ErrNotFound error = fault.New("event_not_found", "event not found")

// Query is one read of a consumer's feed.
type Query struct {
	ConsumerID string
	After      string   // an event id of the consumer's: the events after it; "" from the oldest
	Types      []string // only these types; none: every type
	Limit      int
}

// Page is one read of the feed, in feed order.
type Page struct {
	Events []Event
	Bodies []json.RawMessage
	More   bool
}

// List reads the consumer's feed after q.After, oldest first: dispatched
// events only. An After the consumer has no event under (pruned, or
// another's) is ErrNotFound.
func (l *Log) List(ctx context.Context, q Query) (Page, error) {
	db := l.read.WithContext(ctx)
	tx := db.Where("consumer_id = ? AND position IS NOT NULL", q.ConsumerID)
	if q.After != "" {
		after, err := l.position(db, q.ConsumerID, q.After)
		if err != nil {
			return Page{}, err
		}
		tx = tx.Where("position > ?", after)
	}
	if len(q.Types) > 0 {
		tx = tx.Where("type IN ?", q.Types)
	}
	var p Page
	if err := tx.Order("position").Limit(q.Limit + 1).Find(&p.Events).Error; err != nil {
		return Page{}, fmt.Errorf("list events: %w", err)
	}
	if len(p.Events) > q.Limit {
		p.More, p.Events = true, p.Events[:q.Limit]
	}
	p.Bodies = make([]json.RawMessage, len(p.Events))
	for i, e := range p.Events {
		body, err := l.Body(e)
		if err != nil {
			return Page{}, err
		}
		p.Bodies[i] = body
	}
	return p, nil
}

// Known reports whether id is one of the consumer's events in the feed:
// what an After may name.
func (l *Log) Known(ctx context.Context, consumerID, id string) (bool, error) {
	_, err := l.position(l.read.WithContext(ctx), consumerID, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (l *Log) position(db *gorm.DB, consumerID, id string) (uint64, error) {
	var e Event
	err := db.Select("position").Where("public_id = ? AND consumer_id = ? AND position IS NOT NULL", id, consumerID).Take(&e).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("find event %s: %w", id, err)
	}
	return *e.Position, nil
}
