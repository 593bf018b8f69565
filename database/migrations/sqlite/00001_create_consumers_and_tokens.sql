-- +goose Up
CREATE TABLE consumers (
    id         TEXT     NOT NULL PRIMARY KEY,
    name       TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
CREATE UNIQUE INDEX consumers_name_unique ON consumers (name);

CREATE TABLE personal_access_tokens (
    id           TEXT     NOT NULL PRIMARY KEY,
    consumer_id  TEXT     NOT NULL REFERENCES consumers (id) ON DELETE CASCADE,
    name         TEXT     NOT NULL,
    abilities    TEXT     NOT NULL,
    last_used_at DATETIME NULL,
    expires_at   DATETIME NOT NULL,
    revoked_at   DATETIME NULL,
    created_at   DATETIME NOT NULL,
    updated_at   DATETIME NOT NULL
);
CREATE INDEX personal_access_tokens_consumer_id_index ON personal_access_tokens (consumer_id);

-- +goose Down
DROP TABLE personal_access_tokens;
DROP TABLE consumers;
