-- +goose Up
-- public_id is the intent's opaque id (a ULID), what a 202 names and
-- /api/operations/{id} looks up; never the raw idempotency key. Records made
-- before it existed get a random one. requested_by is the token that asked.
ALTER TABLE idempotency_keys ADD COLUMN public_id TEXT NULL;
ALTER TABLE idempotency_keys ADD COLUMN requested_by TEXT NULL;
UPDATE idempotency_keys SET public_id = lower(hex(randomblob(13))) WHERE public_id IS NULL;
CREATE UNIQUE INDEX idempotency_keys_public_id_unique ON idempotency_keys (public_id);

-- The audit trail of vendor effects on a license, written in the same
-- transaction as the change it records.
CREATE TABLE license_events (
    id          INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    license_id  TEXT     NOT NULL REFERENCES licenses (id),
    consumer_id TEXT     NOT NULL,
    event       TEXT     NOT NULL,
    actor       TEXT     NOT NULL,
    token_id    TEXT     NULL,
    created_at  DATETIME NOT NULL
);
CREATE INDEX license_events_license_index ON license_events (license_id, id);

-- +goose Down
DROP TABLE license_events;
DROP INDEX idempotency_keys_public_id_unique;
ALTER TABLE idempotency_keys DROP COLUMN requested_by;
ALTER TABLE idempotency_keys DROP COLUMN public_id;
