-- +goose Up
CREATE TABLE idempotency_keys (
    id               INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    consumer_id      TEXT     NOT NULL,
    operation        TEXT     NOT NULL,
    idempotency_key  TEXT     NOT NULL,
    request_hash     TEXT     NOT NULL,
    request_body     BLOB     NULL,
    status           TEXT     NOT NULL,
    response_status  INTEGER  NULL,
    response_headers TEXT     NULL,
    response_body    BLOB     NULL,
    resource_type    TEXT     NULL,
    resource_id      TEXT     NULL,
    external_ref     TEXT     NULL,
    correlation_id   TEXT     NULL,
    locked_until     DATETIME NULL,
    attempts         INTEGER  NOT NULL DEFAULT 0,
    created_at       DATETIME NOT NULL,
    updated_at       DATETIME NOT NULL,
    expires_at       DATETIME NOT NULL
);
CREATE UNIQUE INDEX idempotency_keys_scope_unique ON idempotency_keys (consumer_id, operation, idempotency_key);
CREATE INDEX idempotency_keys_status_locked_index ON idempotency_keys (status, locked_until);
CREATE INDEX idempotency_keys_expires_at_index ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
