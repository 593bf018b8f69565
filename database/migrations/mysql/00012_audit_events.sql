-- +goose Up
-- issued_by is the token that issued this one (its id): NULL for a token
-- issued at the command line (licensor token issue), and for tokens issued
-- before it was kept.
ALTER TABLE personal_access_tokens
    ADD COLUMN issued_by CHAR(26) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER abilities;

-- The audit trail of administration: tokens issued and revoked, intents
-- retried and discarded, each written in the same transaction as the change
-- it records. subject_id is the token's id or the intent's public id. actor
-- is what the server knows acted (token: an API call, whose token and
-- consumer are kept beside it; console: the command line), never a value a
-- client sent; request_id is correlation only. Listed by subject (newest or
-- oldest first), or by event and time.
CREATE TABLE audit_events (
    id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    event             VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    subject_type      VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    subject_id        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    actor             VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    actor_consumer_id CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    actor_token_id    CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    request_id        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    reason            VARCHAR(500) NULL,
    created_at        DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY audit_events_subject_index (subject_type, subject_id, id),
    KEY audit_events_event_index (event, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE audit_events;
ALTER TABLE personal_access_tokens DROP COLUMN issued_by;
