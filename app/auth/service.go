package auth

import (
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
)

// touchEvery is how often, at most, a token's last_used_at is written.
const touchEvery = time.Minute

// maxTouched bounds the memory of recent writes: past it, entries older than
// touchEvery are dropped.
const maxTouched = 10000

// Service issues, verifies, lists and revokes tokens.
type Service struct {
	db         *gorm.DB
	signer     signer
	defaultTTL time.Duration
	log        *slog.Logger
	now        func() time.Time

	mu      sync.Mutex
	touched map[string]time.Time // token id → when this process last wrote last_used_at
}

// NewService returns a Service that signs with key (APP_KEY's 32 bytes) as
// issuer, and gives tokens defaultTTL unless asked otherwise. now may be nil.
func NewService(db *gorm.DB, key []byte, issuer string, defaultTTL time.Duration, log *slog.Logger, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		db:         db,
		signer:     signer{key: key, issuer: issuer, now: now},
		defaultTTL: defaultTTL,
		log:        log,
		now:        now,
		touched:    map[string]time.Time{},
	}
}

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

// Issue creates the consumer if it does not exist, records a token for it,
// and returns the signed token string.
func (s *Service) Issue(ctx context.Context, in IssueInput) (Issued, error) {
	in, err := s.validate(in)
	if err != nil {
		return Issued{}, err
	}
	consumer, err := s.consumer(ctx, in.Consumer)
	if err != nil {
		return Issued{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	tok := Token{
		ID:         ulid.Make().String(),
		ConsumerID: consumer.ID,
		Consumer:   consumer,
		Name:       in.Name,
		Abilities:  in.Abilities,
		ExpiresAt:  now.Add(in.TTL),
		CreatedAt:  now,
		UpdatedAt:  now,
	}
	secret, err := s.signer.sign(tok)
	if err != nil {
		return Issued{}, err
	}
	if err := s.db.WithContext(ctx).Omit("Consumer").Create(&tok).Error; err != nil {
		return Issued{}, fmt.Errorf("store token: %w", err)
	}
	return Issued{Token: tok, Secret: secret}, nil
}

func (s *Service) validate(in IssueInput) (IssueInput, error) {
	var v ValidationError
	in.Consumer = strings.TrimSpace(in.Consumer)
	if in.Consumer == "" {
		v.add("consumer", "The consumer field is required.")
	} else if utf8.RuneCountInString(in.Consumer) > 191 {
		v.add("consumer", "The consumer field must not be greater than 191 characters.")
	}
	if len(in.Abilities) == 0 {
		v.add("abilities", "The abilities field is required.")
	}
	for _, a := range in.Abilities {
		if !IsKnown(a) {
			v.add("abilities", fmt.Sprintf("The ability %q is not one of: %s.", a, strings.Join(Known, ", ")))
		}
	}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" {
		in.Name = "token"
	} else if utf8.RuneCountInString(in.Name) > 255 {
		v.add("name", "The name field must not be greater than 255 characters.")
	}
	if in.TTL == 0 {
		in.TTL = s.defaultTTL
	} else if in.TTL < 0 {
		v.add("expires_in", "The expires in field must be a positive duration.")
	}
	return in, v.orNil()
}

// consumer returns the consumer of that name, creating it if needed. The
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
	now := s.now().UTC().Truncate(time.Microsecond)
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
}

// Verify checks the token string and its row: the signature (HS256 with
// APP_KEY only), exp, iss, and that the row exists, belongs to the subject,
// and is neither revoked nor expired. Every failure is ErrUnauthenticated.
func (s *Service) Verify(ctx context.Context, raw string) (Principal, error) {
	c, err := s.signer.parse(raw)
	if err != nil {
		return Principal{}, ErrUnauthenticated
	}
	var tok Token
	err = s.db.WithContext(ctx).Joins("Consumer").Where("personal_access_tokens.id = ?", c.ID).Take(&tok).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("load token: %w", err)
	}
	now := s.now()
	if tok.ConsumerID != c.Subject || !tok.Live(now) {
		return Principal{}, ErrUnauthenticated
	}
	s.touch(tok, now)
	return Principal{ConsumerID: tok.ConsumerID, Consumer: tok.Consumer.Name, TokenID: tok.ID, Abilities: tok.Abilities}, nil
}

// touch records the token's use at most once a minute, in the background, so
// that the request never waits on that write.
func (s *Service) touch(tok Token, now time.Time) {
	if tok.LastUsedAt != nil && now.Sub(*tok.LastUsedAt) < touchEvery {
		return
	}
	s.mu.Lock()
	if last, ok := s.touched[tok.ID]; ok && now.Sub(last) < touchEvery {
		s.mu.Unlock()
		return
	}
	if len(s.touched) >= maxTouched { // forget what no longer throttles anything
		for id, at := range s.touched {
			if now.Sub(at) >= touchEvery {
				delete(s.touched, id)
			}
		}
	}
	s.touched[tok.ID] = now
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		at := now.UTC().Truncate(time.Microsecond)
		err := s.db.WithContext(ctx).Model(&Token{}).Where("id = ?", tok.ID).
			UpdateColumn("last_used_at", at).Error
		if err != nil {
			s.log.Warn("record token use", "token_id", tok.ID, "error", err)
		}
	}()
}

// List returns the tokens, newest first; of one consumer when consumer is
// not empty.
func (s *Service) List(ctx context.Context, consumer string) ([]Token, error) {
	q := s.db.WithContext(ctx).Joins("Consumer").Order("personal_access_tokens.created_at DESC, personal_access_tokens.id DESC")
	if consumer != "" {
		q = q.Where("Consumer.name = ?", consumer)
	}
	var toks []Token
	if err := q.Find(&toks).Error; err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return toks, nil
}

// Revoke revokes a token; it stops working on the next request on every
// replica. Revoking a revoked token is no error.
func (s *Service) Revoke(ctx context.Context, id string) error {
	var tok Token
	db := s.db.WithContext(ctx)
	if err := db.Where("id = ?", id).Take(&tok).Error; errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrTokenNotFound
	} else if err != nil {
		return fmt.Errorf("find token: %w", err)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	err := db.Model(&Token{}).Where("id = ? AND revoked_at IS NULL", id).
		Updates(map[string]any{"revoked_at": now, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	return nil
}
