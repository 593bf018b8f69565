-- +goose Up
-- The operator console's sessions (app/auth's ConsoleSession): the signed
-- cookie names its row, and every console request reads the row with its
-- token's, so that signing out (the row deleted) ends the session on every
-- replica, a copied cookie included. A sign-in deletes the rows that have
-- ended (expires_at).
CREATE TABLE console_sessions (
    id          TEXT     NOT NULL PRIMARY KEY,
    token_id    TEXT     NOT NULL REFERENCES personal_access_tokens (id) ON DELETE CASCADE,
    consumer_id TEXT     NOT NULL,
    expires_at  DATETIME NOT NULL,
    created_at  DATETIME NOT NULL
);
CREATE INDEX console_sessions_token_id_index ON console_sessions (token_id);
CREATE INDEX console_sessions_expires_at_index ON console_sessions (expires_at);

-- +goose Down
DROP TABLE console_sessions;
