package main

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// sqlStorage is fiber.Storage over a table of the peer's database:
// fiber_idempotency(k, v, exp), exp a Unix time in seconds, 0 for never.
type sqlStorage struct {
	db      *sql.DB
	dialect string
}

// migrate creates the peer's tables.
func (s *sqlStorage) migrate(ctx context.Context) error {
	blob := "BLOB"
	if s.dialect == dialectMySQL {
		blob = "LONGBLOB"
	}
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS fiber_idempotency (k VARCHAR(255) PRIMARY KEY, v " + blob + ", exp BIGINT)",
		"CREATE TABLE IF NOT EXISTS peer_tokens (id VARCHAR(64) PRIMARY KEY, token_hash CHAR(64) NOT NULL, abilities TEXT NOT NULL, expires_at BIGINT NOT NULL)",
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Get returns the value of key, nil when there is none or it expired.
func (s *sqlStorage) Get(key string) ([]byte, error) {
	var (
		v   []byte
		exp int64
	)
	err := s.db.QueryRow("SELECT v, exp FROM fiber_idempotency WHERE k = ?", key).Scan(&v, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if exp != 0 && time.Now().Unix() >= exp {
		return nil, nil
	}
	return v, nil
}

// Set stores val under key for exp (0: for ever).
func (s *sqlStorage) Set(key string, val []byte, exp time.Duration) error {
	if key == "" || len(val) == 0 {
		return nil
	}
	var until int64
	if exp > 0 {
		until = time.Now().Add(exp).Unix()
	}
	q := "INSERT INTO fiber_idempotency (k, v, exp) VALUES (?, ?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v, exp = excluded.exp"
	if s.dialect == dialectMySQL {
		q = "INSERT INTO fiber_idempotency (k, v, exp) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v), exp = VALUES(exp)"
	}
	_, err := s.db.Exec(q, key, val, until)
	return err
}

// Delete removes key.
func (s *sqlStorage) Delete(key string) error {
	_, err := s.db.Exec("DELETE FROM fiber_idempotency WHERE k = ?", key)
	return err
}

// Reset removes every key.
func (s *sqlStorage) Reset() error {
	_, err := s.db.Exec("DELETE FROM fiber_idempotency")
	return err
}

// Close does nothing: the database belongs to the peer, which closes it.
func (s *sqlStorage) Close() error { return nil }
