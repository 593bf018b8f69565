-- +goose Up
-- public_id is the intent's opaque id (a ULID), what a 202 names and
-- /api/operations/{id} looks up; never the raw idempotency key. Records made
-- before it existed get a random one. requested_by is the token that asked.
ALTER TABLE idempotency_keys
    ADD COLUMN public_id    CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER id,
    ADD COLUMN requested_by CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER correlation_id;
UPDATE idempotency_keys SET public_id = LEFT(SHA2(CONCAT(UUID(), id), 256), 26) WHERE public_id IS NULL;
ALTER TABLE idempotency_keys ADD UNIQUE KEY idempotency_keys_public_id_unique (public_id);

-- The audit trail of vendor effects on a license, written in the same
-- transaction as the change it records.
CREATE TABLE license_events (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    license_id  CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    consumer_id CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    event       VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    actor       VARCHAR(255) NOT NULL,
    token_id    CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    created_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY license_events_license_index (license_id, id),
    CONSTRAINT license_events_license_id_foreign
        FOREIGN KEY (license_id) REFERENCES licenses (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE license_events;
ALTER TABLE idempotency_keys
    DROP INDEX idempotency_keys_public_id_unique,
    DROP COLUMN requested_by,
    DROP COLUMN public_id;
