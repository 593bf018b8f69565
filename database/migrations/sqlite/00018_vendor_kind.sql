-- +goose Up
-- The vendor the database works with (database.BindVendor): its one row is
-- written by the first command that reaches a vendor, and every later one
-- compares its driver with it, so that a process started without the
-- server's vendor settings cannot settle real intents against the
-- in-memory fake. host is VENDOR_URL's host (never its token or path);
-- http_until, once the database moved from the http driver to the fake,
-- is when: the fake leaves what was made before it alone.
CREATE TABLE vendor_kind (
    id          INTEGER  NOT NULL PRIMARY KEY CHECK (id = 1),
    driver      TEXT     NOT NULL,
    host        TEXT     NOT NULL DEFAULT '',
    http_until  DATETIME NULL,
    recorded_at DATETIME NOT NULL,
    updated_at  DATETIME NOT NULL
);

-- +goose Down
DROP TABLE vendor_kind;
