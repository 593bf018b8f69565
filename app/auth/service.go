package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/internal/fault"
)

// Service issues, verifies, lists and revokes tokens. Verify records each
// token's use in memory; RunTouchWriter (or Flush) writes those uses to
// last_used_at.
type Service struct {
	db         *gorm.DB
	read       *gorm.DB        // the read pool: Verify's reads
	tokenRow   *database.Query // Verify's read, on the read pool
	joinedMu   sync.RWMutex
	joined     map[joinKey]*database.Query // VerifyWith's statements, one per TokenRowJoin's text
	verified   *verifiedCache              // tokens whose signature was checked
	signer     signer
	defaultTTL time.Duration
	maxTTL     time.Duration
	log        *slog.Logger
	now        func() time.Time

	uses uses
}

// Config is what New needs.
type Config struct {
	DB           *gorm.DB      // the consumers and personal_access_tokens tables; required
	Read         *gorm.DB      // Verify's pool: SQLite's read-only one, MySQL's one. Nil: DB
	Key          []byte        // the HS256 signing key: APP_KEY's 32 bytes
	PreviousKeys [][]byte      // still verify the tokens they signed (APP_PREVIOUS_KEYS)
	Issuer       string        // the iss claim written into every token and required of every one verified
	DefaultTTL   time.Duration // a token's lifetime when it is issued without one
	// MaxTTL is the longest lifetime Issue accepts (a longer TTL is an
	// expires_in error, never shortened). Zero: DefaultMaxTTL. A DefaultTTL
	// above it is lowered to it (config.Load refuses that first).
	MaxTTL time.Duration
	// Log receives the last_used_at writer's warnings, and at Debug why
	// Verify refused a well-signed token of another issuer. Nil: discarded.
	Log *slog.Logger
	Now func() time.Time // the clock; nil: time.Now
}

// New returns a Service. Without RunTouchWriter beside it, recorded uses
// stay in memory (at most maxTouched of them) until Flush.
func New(cfg Config) *Service {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	log := cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	maxTTL := cfg.MaxTTL
	if maxTTL <= 0 {
		maxTTL = DefaultMaxTTL
	}
	read := cmp.Or(cfg.Read, cfg.DB)
	return &Service{
		db:         cfg.DB,
		read:       read,
		joined:     map[joinKey]*database.Query{},
		tokenRow:   database.NewQuery(read, tokenRowQuery),
		verified:   &verifiedCache{byToken: map[string]verifiedClaims{}},
		signer:     signer{key: cfg.Key, previous: cfg.PreviousKeys, issuer: cfg.Issuer, now: now},
		defaultTTL: min(cfg.DefaultTTL, maxTTL),
		maxTTL:     maxTTL,
		log:        log,
		now:        now,
		uses:       newUses(),
	}
}

// DefaultMaxTTL is the longest token lifetime when Config.MaxTTL is zero:
// a year, TOKEN_MAX_TTL's default.
const DefaultMaxTTL = 8760 * time.Hour

// IssueInput is what an admin asks for.
type IssueInput struct {
	Consumer  string
	Abilities []string
	Name      string
	TTL       time.Duration // zero: the service's default
}

// Issued is a new token: its row and the token string, shown this once.
type Issued struct {
	Token
	Secret string
}

// Issue records a token for the consumer (created if new), issued by by,
// with its token.issued audit event, and returns the signed token string.
// Invalid input, or a new name that mixes scripts or differs from another
// only in case, is a *fault.Fields. Issue does not ask who grants the
// abilities: the HTTP API asks Grantable first.
func (s *Service) Issue(ctx context.Context, by audit.Actor, in IssueInput) (Issued, error) {
	if err := by.Check(); err != nil {
		return Issued{}, err
	}
	in, err := s.validate(in)
	if err != nil {
		return Issued{}, err
	}
	consumer, err := s.consumer(ctx, in.Consumer)
	if err != nil {
		return Issued{}, err
	}
	now := dbtime.Stamp(s.now())
	tok := Token{
		ID:         ulid.Make().String(),
		ConsumerID: consumer.ID,
		Consumer:   consumer,
		Name:       in.Name,
		Abilities:  in.Abilities,
		IssuedBy:   issuer(by),
		ExpiresAt:  now.Add(in.TTL),
		CreatedAt:  now,
		UpdatedAt:  now,
	}
	secret, err := s.signer.sign(tok)
	if err != nil {
		return Issued{}, err
	}
	err = database.Transact(ctx, s.db, database.RetryOnConflict, func(tx *gorm.DB) error {
		if err := tx.Omit("Consumer").Create(&tok).Error; err != nil {
			return fmt.Errorf("store token: %w", err)
		}
		return audit.Record(tx, by, audit.Change{Event: audit.TokenIssued, SubjectType: audit.SubjectToken, SubjectID: tok.ID}, now)
	})
	if err != nil {
		return Issued{}, err
	}
	return Issued{Token: tok, Secret: secret}, nil
}

// issuer is the token a token issued by by keeps as its issuer: the acting
// token, none for the console.
func issuer(by audit.Actor) *string {
	if by.Kind != audit.ActorToken {
		return nil
	}
	id := by.TokenID
	return &id
}

func (s *Service) validate(in IssueInput) (IssueInput, error) {
	var v fault.Fields
	in.Consumer = NormalizeConsumerName(in.Consumer)
	if msg := consumerNameProblem(in.Consumer); msg != "" {
		v.Add("consumer", msg)
	}
	if len(in.Abilities) == 0 {
		v.Add("abilities", "The abilities field is required.")
	}
	for _, a := range in.Abilities {
		if !IsKnown(a) {
			v.Add("abilities", fmt.Sprintf("The ability %q is not one of: %s.", a, strings.Join(Known, ", ")))
		}
	}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" {
		in.Name = "token"
	} else if utf8.RuneCountInString(in.Name) > 255 {
		v.Add("name", "The name field must not be greater than 255 characters.")
	}
	if in.TTL == 0 {
		in.TTL = s.defaultTTL
	} else if in.TTL < 0 {
		v.Add("expires_in", "The expires in field must be a positive duration.")
	} else if in.TTL > s.maxTTL {
		v.Add("expires_in", fmt.Sprintf("The expires in field must not be greater than %s (the longest lifetime a token may have).", formatDuration(s.maxTTL)))
	}
	return in, v.Err()
}

// consumer returns the consumer of that name (byte for byte: the column is
// utf8mb4_bin, SQLite's BINARY), creating it if needed. Only a new name is
// refused for mixing scripts or differing from another only in case. The
// unique index on name settles two admins creating it at once.
func (s *Service) consumer(ctx context.Context, name string) (Consumer, error) {
	db := s.db.WithContext(ctx)
	var c Consumer
	err := db.Where("name = ?", name).Take(&c).Error
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return Consumer{}, fmt.Errorf("find consumer: %w", err)
	}
	if msg := mixedScriptsProblem(name); msg != "" {
		var v fault.Fields
		v.Add("consumer", msg)
		return Consumer{}, &v
	}
	twin, err := s.caseTwin(ctx, name)
	if err != nil {
		return Consumer{}, err
	}
	if twin != "" {
		var v fault.Fields
		v.Add("consumer", fmt.Sprintf("A consumer named %q already exists; consumer names must not differ only in case. Use %q, or another name.", twin, twin))
		return Consumer{}, &v
	}
	now := dbtime.Stamp(s.now())
	c = Consumer{ID: ulid.Make().String(), Name: name, CreatedAt: now, UpdatedAt: now}
	err = db.Create(&c).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		err = db.Where("name = ?", name).Take(&c).Error
	}
	if err != nil {
		return Consumer{}, fmt.Errorf("create consumer: %w", err)
	}
	return c, nil
}

// Principal is who a verified token speaks for, and what it may do.
type Principal struct {
	ConsumerID string
	Consumer   string // the consumer's name
	TokenID    string
	Abilities  Abilities
	ExpiresAt  time.Time // when the token expires: a session opened with it ends then at the latest
}

// Verify checks the token's signature (HS256), exp and iss, and that its
// row exists, belongs to the subject and is live; every failure is
// ErrUnauthenticated. The row is read on every call, so a revocation takes
// effect at once.
func (s *Service) Verify(ctx context.Context, raw string) (Principal, error) {
	return s.VerifyWith(ctx, raw, nil)
}

// claims checks the signature, exp and iss once per token string.
func (s *Service) claims(raw string) (verifiedClaims, error) {
	if c, ok := s.verified.get(raw, s.now()); ok {
		return c, nil
	}
	parsed, err := s.signer.parse(raw)
	var ie *issuerError
	if errors.As(err, &ie) {
		// A common misconfiguration (replicas or an old token under another
		// APP_URL) that the client only sees as a 401. Never the token.
		s.log.Debug("token issuer does not match APP_URL", "iss", ie.got, "expected", s.signer.issuer)
	}
	if err != nil {
		return verifiedClaims{}, ErrUnauthenticated
	}
	s.verified.put(raw, parsed)
	return verifiedClaims{id: parsed.ID, subject: parsed.Subject}, nil
}

// tokenRowQuery reads what Verify needs of a token row, every request. An
// inner join: a token whose consumer row is gone (possible where foreign
// keys are off) is no token at all.
const tokenRowQuery = `SELECT t.consumer_id, c.name, t.abilities, t.last_used_at, t.expires_at, t.revoked_at
FROM personal_access_tokens t INNER JOIN consumers c ON c.id = t.consumer_id WHERE t.id = ?`

// loadToken reads the token row through a prepared query (no GORM: this
// read is on every request), and j with it when j is not nil.
func (s *Service) loadToken(ctx context.Context, id string, j TokenRowJoin) (Token, error) {
	tok := Token{ID: id}
	var abilities []byte
	dest := []any{&tok.ConsumerID, &tok.Consumer.Name, &abilities,
		database.Time(&tok.LastUsedAt), database.NotNullTime(&tok.ExpiresAt), database.Time(&tok.RevokedAt)}
	q, args := s.tokenRow, []any{id}
	if j != nil {
		q, dest, args = s.joinedQuery(j), append(dest, j.Dest()...), append(j.Args(), id)
	}
	if err := q.Row(ctx, dest, args...); err != nil {
		return Token{}, err
	}
	tok.Consumer.ID = tok.ConsumerID
	var err error
	if tok.Abilities, err = parseAbilities(abilities); err != nil {
		return Token{}, fmt.Errorf("token %s: %w", id, err)
	}
	return tok, nil
}

// List returns the tokens, newest first; of one consumer when consumer is
// not empty (normalised as Issue normalises it).
func (s *Service) List(ctx context.Context, consumer string) ([]Token, error) {
	q := s.db.WithContext(ctx).Joins("Consumer").Order("personal_access_tokens.created_at DESC, personal_access_tokens.id DESC")
	if consumer != "" {
		q = q.Where("Consumer.name = ?", NormalizeConsumerName(consumer))
	}
	var toks []Token
	if err := q.Find(&toks).Error; err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return toks, nil
}

// Revoke revokes a token on behalf of by, with its token.revoked audit
// event; it stops working on the next request on every replica. A token
// may revoke only what Revocable allows it (else a *NotGrantableError); the
// console may revoke any. Revoking a revoked token changes and records
// nothing.
func (s *Service) Revoke(ctx context.Context, by audit.Actor, id string) error {
	if err := by.Check(); err != nil {
		return err
	}
	return database.Transact(ctx, s.db, database.RetryOnConflict, func(tx *gorm.DB) error {
		var tok Token
		if err := tx.Where("id = ?", id).Take(&tok).Error; errors.Is(err, gorm.ErrRecordNotFound) {
			return ErrTokenNotFound
		} else if err != nil {
			return fmt.Errorf("find token: %w", err)
		}
		if err := mayRevoke(tx, by, tok); err != nil {
			return err
		}
		now := dbtime.Stamp(s.now())
		res := tx.Model(&Token{}).Where("id = ? AND revoked_at IS NULL", id).
			Updates(map[string]any{"revoked_at": now, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("revoke token: %w", res.Error)
		}
		if res.RowsAffected == 0 { // revoked already: nothing changed, nothing to record
			return nil
		}
		return audit.Record(tx, by, audit.Change{Event: audit.TokenRevoked, SubjectType: audit.SubjectToken, SubjectID: id}, now)
	})
}

// mayRevoke asks Revocable with the abilities of by's token as stored (they
// never change). Any actor but the console without a token may revoke none.
func mayRevoke(tx *gorm.DB, by audit.Actor, tok Token) error {
	if by.Kind == audit.ActorConsole {
		return nil
	}
	var revoker Token
	if by.Kind == audit.ActorToken {
		err := tx.Select("id", "abilities").Where("id = ?", by.TokenID).Take(&revoker).Error
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("find the revoking token: %w", err)
		}
	}
	return Revocable(revoker.ID, revoker.Abilities, tok)
}

// TokenEvent is an event of the tokens' audit trail, with the names an
// admin reads it by.
type TokenEvent struct {
	audit.Event
	Consumer      string // the subject token's consumer; "" when not on record
	ActorConsumer string // the acting token's consumer; "" for the console, or not on record
}

// TokenEventFilter selects token events: of one token when TokenID is not
// empty; Page from 1, PerPage events a page (0: 50).
type TokenEventFilter struct {
	TokenID       string
	Page, PerPage int
}

// Events lists the tokens' audit events, newest first, and how many f
// selects in all.
func (s *Service) Events(ctx context.Context, f TokenEventFilter) ([]TokenEvent, int64, error) {
	if f.PerPage <= 0 {
		f.PerPage = 50
	}
	events, total, err := audit.List(ctx, s.db, audit.Filter{SubjectType: audit.SubjectToken, SubjectID: f.TokenID,
		NewestFirst: true, Page: f.Page, PerPage: f.PerPage})
	if err != nil || len(events) == 0 {
		return []TokenEvent{}, total, err
	}
	subjects := make([]string, 0, len(events))
	for _, e := range events {
		subjects = append(subjects, e.SubjectID)
	}
	var owners []Token
	if err := s.db.WithContext(ctx).Select("id", "consumer_id").Where("id IN ?", subjects).Find(&owners).Error; err != nil {
		return nil, 0, fmt.Errorf("find the tokens of audit events: %w", err)
	}
	ownerOf := make(map[string]string, len(owners))
	consumers := make([]string, 0, len(owners)+len(events))
	for _, t := range owners {
		ownerOf[t.ID] = t.ConsumerID
		consumers = append(consumers, t.ConsumerID)
	}
	for _, e := range events {
		if e.ActorConsumerID != nil {
			consumers = append(consumers, *e.ActorConsumerID)
		}
	}
	names, err := s.ConsumerNames(ctx, consumers)
	if err != nil {
		return nil, 0, err
	}
	out := make([]TokenEvent, 0, len(events))
	for _, e := range events {
		te := TokenEvent{Event: e, Consumer: names[ownerOf[e.SubjectID]]}
		if e.ActorConsumerID != nil {
			te.ActorConsumer = names[*e.ActorConsumerID]
		}
		out = append(out, te)
	}
	return out, total, nil
}

// ErrConsumerNotFound means no consumer has that name.
var ErrConsumerNotFound = errors.New("consumer not found")

// ConsumerNamed returns the consumer of that name (normalised as Issue
// does), or ErrConsumerNotFound.
func (s *Service) ConsumerNamed(ctx context.Context, name string) (Consumer, error) {
	var c Consumer
	err := s.db.WithContext(ctx).Where("name = ?", NormalizeConsumerName(name)).Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Consumer{}, ErrConsumerNotFound
	}
	if err != nil {
		return Consumer{}, fmt.Errorf("find consumer: %w", err)
	}
	return c, nil
}

// ConsumerNames returns the names of the consumers with those ids.
func (s *Service) ConsumerNames(ctx context.Context, ids []string) (map[string]string, error) {
	var cs []Consumer
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Find(&cs).Error; err != nil {
		return nil, fmt.Errorf("find consumers: %w", err)
	}
	names := make(map[string]string, len(cs))
	for _, c := range cs {
		names[c.ID] = c.Name
	}
	return names, nil
}

// formatDuration renders d the way a person writes it: 8760h, 90m, 1h30m.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
