-- +goose Up
-- A vendor site is claimed once: by the license recorded for it, or as
-- discarded by the create that made it and could not record it (or by an
-- operator's discard of an intent, or the vendor's site.deleted for a site
-- no license held). The primary key, the site's id and its domain (a
-- vendor may give an id again, for another domain), decides a race between
-- the two: a site is never recorded once a discard claimed it, nor deleted
-- once a license did. A discarded site's delete is owed until deleted_at is
-- set: the reconciler retries a delete that failed.
CREATE TABLE vendor_site_claims (
    vendor_site_id VARCHAR(191) NOT NULL,
    domain         VARCHAR(253) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    license_id     CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    created_at     DATETIME(6)  NOT NULL,
    deleted_at     DATETIME(6)  NULL,
    PRIMARY KEY (vendor_site_id, domain),
    KEY vendor_site_claims_owed_index (deleted_at, license_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
-- Every license recorded so far holds its site's claim (the newest, should
-- two name one site: the one likelier to hold it now).
INSERT IGNORE INTO vendor_site_claims (vendor_site_id, domain, license_id, created_at)
    SELECT vendor_site_id, LOWER(domain), id, created_at FROM licenses ORDER BY created_at DESC, id DESC;

-- +goose Down
DROP TABLE vendor_site_claims;
