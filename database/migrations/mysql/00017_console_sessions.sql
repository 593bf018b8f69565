-- +goose Up
-- The operator console's sessions (app/auth's ConsoleSession): the signed
-- cookie names its row, and every console request reads the row with its
-- token's, so that signing out (the row deleted) ends the session on every
-- replica, a copied cookie included. A sign-in deletes the rows that have
-- ended (expires_at).
CREATE TABLE console_sessions (
    id          CHAR(26)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    token_id    CHAR(26)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    consumer_id CHAR(26)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at  DATETIME(6) NOT NULL,
    created_at  DATETIME(6) NOT NULL,
    PRIMARY KEY (id),
    KEY console_sessions_token_id_index (token_id),
    KEY console_sessions_expires_at_index (expires_at),
    CONSTRAINT console_sessions_token_id_foreign
        FOREIGN KEY (token_id) REFERENCES personal_access_tokens (id) ON DELETE CASCADE
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE console_sessions;
