-- +goose Up
-- A license's vendor_event_at orders the vendor's events: an event older
-- than it is not applied. Before webhooks bounded an event's created time,
-- one signed far ahead froze its license (every later real event ignored).
-- A mark ahead of now, which no valid event could have set, is cleared, so
-- the next real event applies. (MariaDB refused to store a created in
-- milliseconds: its DATETIME ends in year 9999.)
UPDATE licenses SET vendor_event_at = NULL
WHERE vendor_event_at > UTC_TIMESTAMP(6) + INTERVAL 5 MINUTE;

-- +goose Down
-- A repair: nothing to undo.
SELECT 1;
