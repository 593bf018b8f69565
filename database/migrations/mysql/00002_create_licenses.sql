-- +goose Up
-- active_domain holds the domain while the license is active and NULL once it
-- is revoked: its unique index is "one active license per domain", enforced by
-- the database on both dialects (MySQL has no partial indexes).
CREATE TABLE licenses (
    id             CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    consumer_id    CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name           VARCHAR(255) NOT NULL,
    domain         VARCHAR(253) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    active_domain  VARCHAR(253) CHARACTER SET ascii COLLATE ascii_bin NULL,
    license_key    VARCHAR(255) NOT NULL,
    status         VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    vendor_site_id VARCHAR(191) NOT NULL,
    revoked_at     DATETIME(6)  NULL,
    created_at     DATETIME(6)  NOT NULL,
    updated_at     DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY licenses_active_domain_unique (active_domain),
    KEY licenses_consumer_status_created_index (consumer_id, status, created_at),
    CONSTRAINT licenses_consumer_id_foreign
        FOREIGN KEY (consumer_id) REFERENCES consumers (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE licenses;
