-- +goose Up
-- An audit event's actor is what the server knows acted (request,
-- reconciler, vendor), never a value a client sent; the request id moves to
-- its own column, kept as correlation only. Older rows named the request by
-- its id in actor: they become actor request with that request id.
ALTER TABLE license_events ADD COLUMN request_id TEXT NULL;
UPDATE license_events SET request_id = actor, actor = 'request' WHERE actor NOT IN ('request', 'reconciler', 'vendor');

-- +goose Down
UPDATE license_events SET actor = request_id WHERE actor = 'request' AND request_id IS NOT NULL;
ALTER TABLE license_events DROP COLUMN request_id;
