-- +goose Up
-- body_hash is the SHA-256 of the request as its first execution received it
-- (method, route and the body's bytes): a retry that sends the same bytes is
-- replayed without parsing its body again. NULL for older records, which
-- are matched by request_hash as before.
ALTER TABLE idempotency_keys ADD COLUMN body_hash TEXT NULL;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN body_hash;
