package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/dbtime"
)

// ConsoleSession is a console session an operator opened with a token. The
// cookie only names the row, so deleting it (signing out) ends the session
// on every replica, whoever holds a copy of the cookie.
type ConsoleSession struct {
	ID         string `gorm:"primaryKey"`
	TokenID    string
	ConsumerID string
	ExpiresAt  time.Time
	CreatedAt  time.Time
}

// TableName is the table's name.
func (ConsoleSession) TableName() string { return "console_sessions" }

// OpenSession records a console session of p's token until expires, and
// returns its id. It deletes the sessions that have ended: sign-ins are
// few, and this keeps the table to the sessions that may still be used.
func (s *Service) OpenSession(ctx context.Context, p Principal, expires time.Time) (string, error) {
	now := dbtime.Stamp(s.now())
	row := ConsoleSession{ID: ulid.Make().String(), TokenID: p.TokenID, ConsumerID: p.ConsumerID,
		ExpiresAt: dbtime.Stamp(expires), CreatedAt: now}
	err := database.RetryOnConflict(ctx, func() *gorm.DB {
		return s.db.WithContext(ctx).Create(&row)
	}).Error
	if err != nil {
		return "", fmt.Errorf("open console session: %w", err)
	}
	if err := s.db.WithContext(ctx).Where("expires_at <= ?", now).Delete(&ConsoleSession{}).Error; err != nil {
		s.log.Warn("console sessions that have ended were not deleted", "error", err)
	}
	return row.ID, nil
}

// EndSession deletes the console session id (signing out). Ending a session
// that is gone already is no error.
func (s *Service) EndSession(ctx context.Context, id string) error {
	err := database.RetryOnConflict(ctx, func() *gorm.DB {
		return s.db.WithContext(ctx).Where("id = ?", id).Delete(&ConsoleSession{})
	}).Error
	if err != nil {
		return fmt.Errorf("end console session: %w", err)
	}
	return nil
}

// Session returns the principal of the console session sessionID, opened
// with the token tokenID of consumerID (what its signed cookie says). Its
// row and the token's are read in one statement on every call, so a session
// ends on the request after it is ended, expires, or its token does. Every
// refusal is ErrUnauthenticated.
func (s *Service) Session(ctx context.Context, sessionID, tokenID, consumerID string) (Principal, error) {
	row := &sessionRow{id: sessionID}
	p, err := s.session(ctx, tokenID, consumerID, row)
	if err != nil {
		return Principal{}, err
	}
	if !row.tokenID.Valid || row.tokenID.String != tokenID || row.expires == nil || !s.now().Before(*row.expires) {
		return Principal{}, ErrUnauthenticated
	}
	return p, nil
}

// sessionRow is the TokenRowJoin that reads a console session's row in the
// token row's statement.
type sessionRow struct {
	id      string
	tokenID sql.NullString
	expires *time.Time
}

var _ TokenRowJoin = (*sessionRow)(nil)

func (r *sessionRow) Join() (columns, join string) {
	return "cs.token_id, cs.expires_at", "LEFT JOIN console_sessions cs ON cs.id = ? AND cs.consumer_id = t.consumer_id"
}

func (r *sessionRow) Args() []any { return []any{r.id} }

func (r *sessionRow) Dest() []any { return []any{&r.tokenID, database.Time(&r.expires)} }

// session is the token's principal, for Verify and Session.
func (s *Service) session(ctx context.Context, tokenID, consumerID string, j TokenRowJoin) (Principal, error) {
	if o, ok := j.(OptionalJoin); ok && !o.Needed(consumerID) {
		j = nil
	}
	tok, err := s.loadToken(ctx, tokenID, j)
	if errors.Is(err, database.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("load token: %w", err)
	}
	now := s.now()
	if tok.ConsumerID != consumerID || !tok.Live(now) {
		return Principal{}, ErrUnauthenticated
	}
	s.recordUse(tok, now)
	return Principal{ConsumerID: tok.ConsumerID, Consumer: tok.Consumer.Name, TokenID: tok.ID, Abilities: tok.Abilities,
		ExpiresAt: tok.ExpiresAt}, nil
}
