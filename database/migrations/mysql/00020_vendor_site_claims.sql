-- +goose Up
-- A vendor site is claimed once, ever: by the license recorded for it, or
-- as discarded by the create that made it and could not record it (or by
-- an operator's discard of an intent). The primary key decides a race
-- between the two: a site is never recorded once a discard claimed it, nor
-- deleted once a license did, and a revoked license's site is never
-- recorded again for another license. A discarded site's delete is owed
-- until deleted_at is set: the reconciler retries a delete that failed.
CREATE TABLE vendor_site_claims (
    vendor_site_id VARCHAR(191) NOT NULL,
    license_id     CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    created_at     DATETIME(6)  NOT NULL,
    deleted_at     DATETIME(6)  NULL,
    PRIMARY KEY (vendor_site_id),
    KEY vendor_site_claims_owed_index (deleted_at, license_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
-- Every license recorded so far holds its site's claim (the oldest, should
-- two name one site).
INSERT IGNORE INTO vendor_site_claims (vendor_site_id, license_id, created_at)
    SELECT vendor_site_id, id, created_at FROM licenses ORDER BY created_at, id;

-- +goose Down
DROP TABLE vendor_site_claims;
