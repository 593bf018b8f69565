-- +goose Up
CREATE TABLE consumers (
    id         CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name       VARCHAR(191) NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY consumers_name_unique (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE personal_access_tokens (
    id           CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    consumer_id  CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name         VARCHAR(255) NOT NULL,
    abilities    TEXT         NOT NULL,
    last_used_at DATETIME(6)  NULL,
    expires_at   DATETIME(6)  NOT NULL,
    revoked_at   DATETIME(6)  NULL,
    created_at   DATETIME(6)  NOT NULL,
    updated_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY personal_access_tokens_consumer_id_index (consumer_id),
    CONSTRAINT personal_access_tokens_consumer_id_foreign
        FOREIGN KEY (consumer_id) REFERENCES consumers (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE personal_access_tokens;
DROP TABLE consumers;
