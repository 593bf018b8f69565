-- +goose Up
-- The same table as on MySQL: a vendor site (its id and its domain: a
-- vendor may give an id again) is claimed once, by the license recorded for
-- it or as discarded; the primary key decides a race between the two. A
-- discarded site's delete is owed until deleted_at is set.
CREATE TABLE vendor_site_claims (
    vendor_site_id TEXT     NOT NULL,
    domain         TEXT     NOT NULL,
    license_id     TEXT     NULL,
    created_at     DATETIME NOT NULL,
    deleted_at     DATETIME NULL,
    PRIMARY KEY (vendor_site_id, domain)
);
CREATE INDEX vendor_site_claims_owed_index ON vendor_site_claims (deleted_at, license_id);
-- Every license recorded so far holds its site's claim (the newest, should
-- two name one site: the one likelier to hold it now).
INSERT OR IGNORE INTO vendor_site_claims (vendor_site_id, domain, license_id, created_at)
    SELECT vendor_site_id, LOWER(domain), id, created_at FROM licenses ORDER BY created_at DESC, id DESC;

-- +goose Down
DROP TABLE vendor_site_claims;
