-- +goose Up
-- Keys, scopes and hashes compare byte for byte (ascii_bin): "abc" and "ABC"
-- are two keys. Every lookup carries consumer_id first, the natural shard key.
CREATE TABLE idempotency_keys (
    id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    consumer_id      CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    operation        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    idempotency_key  VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    request_hash     CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    request_body     MEDIUMBLOB   NULL,
    status           VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    response_status  SMALLINT     NULL,
    response_headers TEXT         NULL,
    response_body    MEDIUMBLOB   NULL,
    resource_type    VARCHAR(64)  NULL,
    resource_id      VARCHAR(64)  NULL,
    external_ref     VARCHAR(255) NULL,
    correlation_id   VARCHAR(255) NULL,
    locked_until     DATETIME(6)  NULL,
    attempts         INT          NOT NULL DEFAULT 0,
    created_at       DATETIME(6)  NOT NULL,
    updated_at       DATETIME(6)  NOT NULL,
    expires_at       DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY idempotency_keys_scope_unique (consumer_id, operation, idempotency_key),
    KEY idempotency_keys_status_locked_index (status, locked_until),
    KEY idempotency_keys_expires_at_index (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE idempotency_keys;
