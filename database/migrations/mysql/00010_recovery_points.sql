-- +goose Up
-- phase is the recovery point an intent reached: reserved (the vendor has
-- not heard of it), started (its call to the vendor may have begun),
-- finished (settled with its local writes). NULL on older records, which are
-- taken as started: they may have reached the vendor. subject is what the
-- intent is about within its consumer (a create: the normalised domain), so
-- that a later settled create, or a revoke, supersedes the older open intents
-- for it. A license keeps the public id of the intent that made it.
ALTER TABLE idempotency_keys
    ADD COLUMN phase VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER status,
    ADD COLUMN subject VARCHAR(253) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER operation,
    ADD KEY idempotency_keys_subject_index (consumer_id, subject, status);
ALTER TABLE licenses ADD COLUMN intent_id VARCHAR(26) CHARACTER SET ascii COLLATE ascii_bin NULL;

-- +goose Down
ALTER TABLE licenses DROP COLUMN intent_id;
ALTER TABLE idempotency_keys DROP KEY idempotency_keys_subject_index, DROP COLUMN subject, DROP COLUMN phase;
