-- +goose Up
-- phase is the recovery point an intent reached: reserved (the vendor has
-- not heard of it), started (its call to the vendor may have begun),
-- finished (settled with its local writes). NULL on older records, which are
-- taken as started: they may have reached the vendor. subject is what the
-- intent is about within its consumer (a create: the normalised domain), so
-- that a later settled create, or a revoke, supersedes the older open intents
-- for it. A license keeps the public id of the intent that made it.
ALTER TABLE idempotency_keys ADD COLUMN phase TEXT NULL;
ALTER TABLE idempotency_keys ADD COLUMN subject TEXT NULL;
CREATE INDEX idempotency_keys_subject_index ON idempotency_keys (consumer_id, subject, status);
ALTER TABLE licenses ADD COLUMN intent_id TEXT NULL;

-- +goose Down
ALTER TABLE licenses DROP COLUMN intent_id;
DROP INDEX idempotency_keys_subject_index;
ALTER TABLE idempotency_keys DROP COLUMN subject;
ALTER TABLE idempotency_keys DROP COLUMN phase;
