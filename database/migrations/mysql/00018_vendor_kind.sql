-- +goose Up
-- The vendor the database works with (database.BindVendor): its one row is
-- written by the first command that reaches a vendor, and every later one
-- compares its driver with it, so that a process started without the
-- server's vendor settings cannot settle real intents against the
-- in-memory fake. host is VENDOR_URL's host (never its token or path);
-- http_until, once the database moved from the http driver to the fake,
-- is when: the fake leaves what was made before it alone.
CREATE TABLE vendor_kind (
    id          TINYINT UNSIGNED NOT NULL,
    driver      VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    host        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    http_until  DATETIME(6)  NULL,
    recorded_at DATETIME(6)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT vendor_kind_one_row CHECK (id = 1)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE vendor_kind;
