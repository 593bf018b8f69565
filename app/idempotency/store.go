package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/ptr"
)

// Store keeps records in the idempotency_keys table. Every method is one
// short statement: no transaction or row lock outlives a call, and every
// lookup carries consumer_id, the natural shard key.
type Store struct {
	db      *gorm.DB
	read    *gorm.DB // the read pool (SQLite's read-only one; on MySQL db)
	cipher  Cipher
	byScope *database.Query       // Find's read, on the read pool
	group   *database.GroupCommit // the request path's writes, batched (SQLite); nil: each on its own
}

// Cipher keeps stored bodies encrypted at rest, and digests keys for logs
// and listings (app/crypt's *Cipher). A body stored in plaintext before
// encryption at rest replays as it is until `licensor keys rotate` seals it.
type Cipher interface {
	Encrypt(plain []byte) (string, error)
	Decrypt(envelope string) ([]byte, error)
	Encrypted(s string) bool // an envelope, not a plaintext value
	Digest(s string) string  // a short keyed digest of a secret, safe to show
}

// NewStore returns a Store on db that keeps bodies sealed with c, reading
// on read and writing the request path through group when they are not nil.
// It panics without a Cipher: a body is never stored in plaintext.
func NewStore(db *gorm.DB, c Cipher, read *gorm.DB, group *database.GroupCommit) *Store {
	if c == nil {
		panic("idempotency: NewStore needs a Cipher")
	}
	if read == nil {
		read = db
	}
	return &Store{db: db, read: read, cipher: c, byScope: database.NewQuery(read, findQuery), group: group}
}

// write runs one write statement of the request path: in the next group
// commit when the Store has one, else on its own, retried on a lock conflict.
func (s *Store) write(ctx context.Context, stmt func(db *gorm.DB) *gorm.DB) *gorm.DB {
	if s.group == nil {
		return database.RetryOnConflict(ctx, func() *gorm.DB { return stmt(s.db.WithContext(ctx)) })
	}
	var res *gorm.DB
	err := s.group.Do(ctx, func(tx *gorm.DB) error {
		res = stmt(tx)
		return res.Error
	})
	if res == nil || err != nil && res.Error == nil {
		// Never run, or run and then lost with its batch's commit.
		return &gorm.DB{Error: err}
	}
	return res
}

// findQuery reads one record by its scope: all but the stored request,
// which only the reconciler reads.
const findQuery = `SELECT id, public_id, consumer_id, operation, idempotency_key, request_hash, body_hash,
status, response_status, response_headers, response_body, resource_type, resource_id, external_ref,
correlation_id, requested_by, locked_until, attempts, created_at, updated_at, expires_at
FROM idempotency_keys WHERE consumer_id = ? AND operation = ? AND idempotency_key = ?`

// KeyDigest is what logs and intents show for a key, never the key itself:
// keyed by APP_KEY, so a guessable key cannot be found from its digest.
func (s *Store) KeyDigest(key string) string { return s.cipher.Digest(key) }

// find returns the record of the scope but its RequestBody, or nil. It is
// the read every keyed request makes: a prepared statement scanned by hand
// (no GORM), on the read pool.
func (s *Store) find(ctx context.Context, sc scope) (*Record, error) {
	var r Record
	err := s.byScope.Row(ctx, []any{&r.ID, &r.PublicID, &r.ConsumerID, &r.Operation, &r.Key, &r.RequestHash, &r.BodyHash,
		&r.Status, &r.ResponseStatus, &r.ResponseHeaders, &r.ResponseBody, &r.ResourceType,
		&r.ResourceID, &r.ExternalRef, &r.CorrelationID, &r.RequestedBy, database.Time(&r.LockedUntil), &r.Attempts,
		database.NotNullTime(&r.CreatedAt), database.NotNullTime(&r.UpdatedAt), database.NotNullTime(&r.ExpiresAt)},
		sc.ConsumerID, sc.Operation, sc.Key)
	if errors.Is(err, database.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find idempotency record: %w", err)
	}
	if err := s.open(&r.ResponseBody, "response", r.ID); err != nil {
		return nil, err
	}
	return &r, nil
}

// sealRequest seals a request body like a response body: a vendor event
// carries a license key.
func (s *Store) sealRequest(body []byte) ([]byte, error) {
	if len(body) == 0 {
		return body, nil
	}
	sealed, err := s.cipher.Encrypt(body)
	if err != nil {
		return nil, fmt.Errorf("encrypt the request body: %w", err)
	}
	return []byte(sealed), nil
}

// open decrypts a stored body of record id in place; one stored before it
// was sealed is read as it is.
func (s *Store) open(body *[]byte, what string, id uint64) error {
	if len(*body) == 0 || !s.cipher.Encrypted(string(*body)) {
		return nil
	}
	plain, err := s.cipher.Decrypt(string(*body))
	if err != nil {
		return fmt.Errorf("decrypt the %s of idempotency record %d: %w", what, id, err)
	}
	*body = plain
	return nil
}

// reserve inserts r. The unique index decides who owns the intent: when
// another record holds the scope, reserve returns it and ok=false.
func (s *Store) reserve(ctx context.Context, r *Record) (existing *Record, ok bool, err error) {
	row := *r // the row holds the request sealed; r keeps it open
	if row.RequestBody, err = s.sealRequest(r.RequestBody); err != nil {
		return nil, false, err
	}
	err = s.write(ctx, func(db *gorm.DB) *gorm.DB { return db.Create(&row) }).Error
	if err == nil {
		r.ID, r.PublicID = row.ID, row.PublicID
		return nil, true, nil
	}
	if database.IsConflict(err) { // still contended: the key is busy; the caller re-reads it
		return nil, false, errRaced
	}
	if !errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil, false, fmt.Errorf("reserve idempotency key: %w", err)
	}
	existing, err = s.find(ctx, r.scope())
	if err == nil && existing == nil {
		err = errRaced // deleted between our INSERT and our read: try again
	}
	return existing, false, err
}

var errRaced = errors.New("idempotency record changed during reservation")

// casWhere matches the row only as it was read: the compare-and-set that
// lets exactly one of several contenders take a record over.
func casWhere(db *gorm.DB, read *Record) *gorm.DB {
	q := db.Where("id = ? AND consumer_id = ? AND status = ? AND expires_at = ?", read.ID, read.ConsumerID, read.Status, read.ExpiresAt)
	if read.LockedUntil == nil {
		return q.Where("locked_until IS NULL")
	}
	return q.Where("locked_until = ?", *read.LockedUntil)
}

// leaseHeld matches r only while it is still in status under the lease its
// holder set. A nil lease matches nothing.
func leaseHeld(db *gorm.DB, r *Record, status string, lease *time.Time) *gorm.DB {
	return db.Where("id = ? AND consumer_id = ? AND status = ? AND locked_until = ?", r.ID, r.ConsumerID, status, lease)
}

// takeOver claims read for a new execution of r's request, if unchanged. An
// expired record becomes a new intent; any other keeps its public id and
// the phase it reached, and r remembers what it took over.
func (s *Store) takeOver(ctx context.Context, read, r *Record) (bool, error) {
	sealed, err := s.sealRequest(r.RequestBody)
	if err != nil {
		return false, err
	}
	set := map[string]any{
		"status":           statusProcessing,
		"subject":          r.Subject,
		"request_hash":     r.RequestHash,
		"body_hash":        r.BodyHash,
		"request_body":     sealed,
		"locked_until":     r.LockedUntil,
		"correlation_id":   r.CorrelationID,
		"attempts":         gorm.Expr("attempts + 1"),
		"response_status":  nil,
		"response_headers": nil,
		"response_body":    nil,
		"updated_at":       r.UpdatedAt,
	}
	expired := read.expired(r.CreatedAt)
	if expired { // a new intent: its clock restarts, under a new id, from its first phase
		set["phase"] = phaseReserved
		set["created_at"], set["expires_at"], set["attempts"] = r.CreatedAt, r.ExpiresAt, 1
		set["resource_type"], set["resource_id"], set["external_ref"] = nil, nil, nil
		set["public_id"], set["requested_by"] = r.PublicID, r.RequestedBy
	}
	res := s.write(ctx, func(db *gorm.DB) *gorm.DB { return casWhere(db.Model(&Record{}), read).Updates(set) })
	if res.Error != nil {
		return false, fmt.Errorf("take over idempotency record: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return false, nil
	}
	r.ID = read.ID
	if !expired { // the same intent, the same id, the recovery point it had reached
		r.PublicID, r.Phase, r.prior = read.PublicID, read.Phase, read
	}
	return true, nil
}

// Response is an operation's answer: what a completed intent stores and
// replays, with what it made, kept with the record for the intents API.
type Response struct {
	Status  int
	Headers map[string]string
	Body    []byte
	// ResourceType and ResourceID name what the intent made or changed.
	ResourceType string
	ResourceID   string
	ExternalRef  string // what the vendor knows the intent by (a site's id)
	// NoEffect says the operation changed nothing (a create for a domain the
	// consumer already held): its answer is given but not stored, and the
	// key is released, so that a retry tells the truth of its own time.
	NoEffect bool
}

// complete stores the response of an execution that had an effect.
func (s *Store) complete(ctx context.Context, r *Record, resp Response, now time.Time) error {
	set, err := s.completed(resp, now)
	if err != nil {
		return err
	}
	set["phase"] = phaseFinished
	return s.settle(ctx, r, set)
}

// completed is the update that makes a record replay resp, its body sealed.
func (s *Store) completed(resp Response, now time.Time) (map[string]any, error) {
	body, err := s.cipher.Encrypt(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("encrypt the response body: %w", err)
	}
	return map[string]any{
		"status":           StatusCompleted,
		"response_status":  resp.Status,
		"response_headers": encodeHeaders(resp.Headers),
		"response_body":    []byte(body), // bytes: the column is a BLOB
		"resource_type":    ptr.OrNil(resp.ResourceType),
		"resource_id":      ptr.OrNil(resp.ResourceID),
		"external_ref":     ptr.OrNil(resp.ExternalRef),
		"locked_until":     nil,
		"updated_at":       now,
	}, nil
}

// markPending keeps an intent whose outcome is unknown, due at once.
func (s *Store) markPending(ctx context.Context, r *Record, about Response, now time.Time) error {
	return s.settle(ctx, r, map[string]any{
		"status":        StatusPending,
		"resource_type": ptr.OrNil(about.ResourceType),
		"resource_id":   ptr.OrNil(about.ResourceID),
		"external_ref":  ptr.OrNil(about.ExternalRef),
		"locked_until":  nil,
		"updated_at":    now,
	})
}

// settle updates the record the caller owns; ErrLeaseLost when it no longer does.
func (s *Store) settle(ctx context.Context, r *Record, set map[string]any) error {
	return s.owned(ctx, "settle", r, func(q *gorm.DB) *gorm.DB { return q.Updates(set) })
}

// release deletes the record of an execution that had no effect.
func (s *Store) release(ctx context.Context, r *Record) error {
	return s.owned(ctx, "release", r, func(q *gorm.DB) *gorm.DB { return q.Delete(&Record{}) })
}

// owned runs stmt on the record the caller owns; ErrLeaseLost for no row.
func (s *Store) owned(ctx context.Context, what string, r *Record, stmt func(q *gorm.DB) *gorm.DB) error {
	res := s.write(ctx, func(db *gorm.DB) *gorm.DB {
		return stmt(leaseHeld(db.Model(&Record{}), r, statusProcessing, r.LockedUntil))
	})
	if res.Error != nil {
		return fmt.Errorf("%s idempotency record: %w", what, res.Error)
	}
	if res.RowsAffected != 1 {
		return ErrLeaseLost
	}
	return nil
}

// openStatuses are the statuses of an intent not settled for good.
var openStatuses = []string{statusProcessing, StatusPending, StatusFailed, statusAbandoned}

// supersede marks the consumer's open intents of operation about subject
// superseded: when beforeID is not 0, only those inserted before it, and
// not one whose owner is at work on it (it answers what it finds). They are
// read first (a plain read, no range lock), then updated by id, still open.
func (s *Store) supersede(tx *gorm.DB, consumerID, operation, subject string, beforeID uint64, now time.Time) error {
	q := tx.Model(&Record{}).Where("consumer_id = ? AND subject = ? AND operation = ? AND status IN ?", consumerID, subject, operation, openStatuses)
	if beforeID > 0 {
		q = q.Where("id < ?", beforeID).Where("NOT (status = ? AND locked_until > ?)", statusProcessing, now)
	}
	var ids []uint64
	if err := q.Pluck("id", &ids).Error; err != nil {
		return fmt.Errorf("find older intents: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	u := tx.Model(&Record{}).Where("id IN ? AND status IN ?", ids, openStatuses)
	if beforeID > 0 { // the exclusion again: one may have been taken over since it was read
		u = u.Where("NOT (status = ? AND locked_until > ?)", statusProcessing, now)
	}
	// One that may have reached the vendor keeps its phase, started, and its
	// owner's lease: the reconciler clears what it may have left there once
	// that lease is over (Reconciler.clearSuperseded).
	err := u.Updates(map[string]any{"status": statusSuperseded,
		"phase":        gorm.Expr("CASE WHEN phase = ? THEN phase ELSE ? END", phaseStarted, phaseFinished),
		"locked_until": gorm.Expr("CASE WHEN phase = ? THEN locked_until ELSE NULL END", phaseStarted),
		"updated_at":   now}).Error
	if err != nil {
		return fmt.Errorf("supersede older intents: %w", err)
	}
	return nil
}

// whyNotOwned tells why an owner's write matched no row: ErrSuperseded, or
// ErrLeaseLost.
func (s *Store) whyNotOwned(db *gorm.DB, r *Record) error {
	var status string
	if err := db.Model(&Record{}).Where("id = ?", r.ID).Select("status").Scan(&status).Error; err != nil {
		return fmt.Errorf("read idempotency record: %w", err)
	}
	if status == statusSuperseded {
		return ErrSuperseded
	}
	return ErrLeaseLost
}

// abandon settles a processing record that never started; false when it
// changed meanwhile.
func (s *Store) abandon(ctx context.Context, read *Record, now time.Time) (bool, error) {
	res := s.write(ctx, func(db *gorm.DB) *gorm.DB {
		return casWhere(db.Model(&Record{}), read).Where("status = ? AND phase = ?", statusProcessing, phaseReserved).
			Updates(map[string]any{"status": statusAbandoned, "locked_until": nil, "updated_at": now})
	})
	if res.Error != nil {
		return false, fmt.Errorf("abandon idempotency record: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// giveBack ends an execution that had no effect on r, which it owns. A fresh
// intent is kept abandoned for its fingerprint, or deleted under a key the
// server made (no client can send it again). A superseded intent taken over
// is superseded again; one that may have reached the vendor goes back to
// pending: a retry's definite failure says nothing of the first one's effect.
func (s *Store) giveBack(ctx context.Context, r *Record, now time.Time) error {
	p := r.prior
	switch {
	case p == nil && strings.HasPrefix(r.Key, autoPrefix):
		return s.release(ctx, r)
	case p == nil, p.Status == statusAbandoned, !p.mayHaveStarted() && p.Status != statusSuperseded:
		return s.settle(ctx, r, map[string]any{"status": statusAbandoned, "locked_until": nil, "updated_at": now})
	case p.Status == statusSuperseded:
		// Its phase is left as the supersession left it (the retry never
		// started): a started one is still the reconciler's to clear, once
		// the lease is over (the first owner may still be at the vendor).
		return s.settle(ctx, r, map[string]any{"status": statusSuperseded, "updated_at": now})
	}
	return s.settle(ctx, r, map[string]any{"status": StatusPending, "locked_until": nil, "updated_at": now})
}

// encodeHeaders writes headers as sorted "Name: value" lines, which a replay
// sets without a JSON decode.
func encodeHeaders(h map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(h)) {
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(h[name])
		b.WriteByte('\n')
	}
	return b.String()
}

// eachHeader calls fn for each stored header, also of the JSON object older
// records hold.
func eachHeader(stored string, fn func(name, value string)) error {
	if strings.HasPrefix(stored, "{") {
		var h map[string]string
		if err := json.Unmarshal([]byte(stored), &h); err != nil {
			return err
		}
		for name, value := range h {
			fn(name, value)
		}
		return nil
	}
	for line := range strings.SplitSeq(stored, "\n") {
		if name, value, ok := strings.Cut(line, ": "); ok {
			fn(name, value)
		}
	}
	return nil
}

func storedHeader(stored *string, name string) string {
	if stored == nil {
		return ""
	}
	var found string
	_ = eachHeader(*stored, func(n, v string) {
		if http.CanonicalHeaderKey(n) == http.CanonicalHeaderKey(name) {
			found = v
		}
	})
	return found
}

// bodyHash is the hex SHA-256 of a request's method, route and body bytes,
// each length-prefixed so that no two requests share an encoding.
func bodyHash(method, route string, body []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(method), []byte(route), body} {
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(part))))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
