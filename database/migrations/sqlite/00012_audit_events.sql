-- +goose Up
-- issued_by is the token that issued this one (its id): NULL for a token
-- issued at the command line (licensor token issue), and for tokens issued
-- before it was kept.
ALTER TABLE personal_access_tokens ADD COLUMN issued_by TEXT NULL;

-- The audit trail of administration: tokens issued and revoked, intents
-- retried and discarded, each written in the same transaction as the change
-- it records. subject_id is the token's id or the intent's public id. actor
-- is what the server knows acted (token: an API call, whose token and
-- consumer are kept beside it; console: the command line), never a value a
-- client sent; request_id is correlation only. Listed by subject (newest or
-- oldest first), or by event and time.
CREATE TABLE audit_events (
    id                INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    event             TEXT     NOT NULL,
    subject_type      TEXT     NOT NULL,
    subject_id        TEXT     NOT NULL,
    actor             TEXT     NOT NULL,
    actor_consumer_id TEXT     NULL,
    actor_token_id    TEXT     NULL,
    request_id        TEXT     NULL,
    reason            TEXT     NULL,
    created_at        DATETIME NOT NULL
);
CREATE INDEX audit_events_subject_index ON audit_events (subject_type, subject_id, id);
CREATE INDEX audit_events_event_index ON audit_events (event, created_at);

-- +goose Down
DROP TABLE audit_events;
ALTER TABLE personal_access_tokens DROP COLUMN issued_by;
