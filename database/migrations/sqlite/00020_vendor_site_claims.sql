-- +goose Up
-- The same table as on MySQL: a vendor site is claimed once, ever, by the
-- license recorded for it or as discarded by the create that made it and
-- could not record it; the primary key decides a race between the two. A
-- discarded site's delete is owed until deleted_at is set.
CREATE TABLE vendor_site_claims (
    vendor_site_id TEXT     NOT NULL PRIMARY KEY,
    license_id     TEXT     NULL,
    created_at     DATETIME NOT NULL,
    deleted_at     DATETIME NULL
);
CREATE INDEX vendor_site_claims_owed_index ON vendor_site_claims (deleted_at, license_id);
-- Every license recorded so far holds its site's claim (the oldest, should
-- two name one site).
INSERT OR IGNORE INTO vendor_site_claims (vendor_site_id, license_id, created_at)
    SELECT vendor_site_id, id, created_at FROM licenses ORDER BY created_at, id;

-- +goose Down
DROP TABLE vendor_site_claims;
