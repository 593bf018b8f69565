-- +goose Up
-- Consumer names compare byte for byte, as on SQLite: "muller gmbh" is not
-- "Müller GmbH". (The application refuses a name that differs from an
-- existing one only in case.)
ALTER TABLE consumers MODIFY name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
-- License keys are stored encrypted: the envelope is longer than the key.
ALTER TABLE licenses MODIFY license_key TEXT NOT NULL;
-- What /readyz writes and deletes again to prove the database takes writes.
CREATE TABLE readiness_probes (
    id         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    checked_at DATETIME(6) NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE readiness_probes;
ALTER TABLE licenses MODIFY license_key VARCHAR(255) NOT NULL;
ALTER TABLE consumers MODIFY name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL;
