-- +goose Up
-- (Consumer names already compare byte for byte here, and license_key is
-- TEXT, long enough for its encrypted envelope.)
-- What /readyz writes and deletes again to prove the database takes writes.
CREATE TABLE readiness_probes (
    id         TEXT     NOT NULL PRIMARY KEY,
    checked_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE readiness_probes;
