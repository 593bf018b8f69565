-- +goose Up
-- active_domain holds the domain while the license is active and NULL once it
-- is revoked: its unique index is "one active license per domain", the same
-- way on both dialects.
CREATE TABLE licenses (
    id             TEXT     NOT NULL PRIMARY KEY,
    consumer_id    TEXT     NOT NULL REFERENCES consumers (id),
    name           TEXT     NOT NULL,
    domain         TEXT     NOT NULL,
    active_domain  TEXT     NULL,
    license_key    TEXT     NOT NULL,
    status         TEXT     NOT NULL,
    vendor_site_id TEXT     NOT NULL,
    revoked_at     DATETIME NULL,
    created_at     DATETIME NOT NULL,
    updated_at     DATETIME NOT NULL
);
CREATE UNIQUE INDEX licenses_active_domain_unique ON licenses (active_domain);
CREATE INDEX licenses_consumer_status_created_index ON licenses (consumer_id, status, created_at);

-- +goose Down
DROP TABLE licenses;
