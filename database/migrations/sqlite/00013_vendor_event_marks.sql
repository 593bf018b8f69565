-- +goose Up
-- A license's vendor_event_at orders the vendor's events: an event older
-- than it is not applied. Before webhooks bounded an event's created time,
-- one signed far ahead (or in milliseconds: a date millennia away, which
-- SQLite kept as text no read could parse) froze its license and failed
-- every read of it. A mark that no valid event could have set (unreadable,
-- or ahead of now) is cleared, so the next real event applies.
UPDATE licenses SET vendor_event_at = NULL
WHERE vendor_event_at IS NOT NULL
  AND (julianday(vendor_event_at) IS NULL OR julianday(vendor_event_at) > julianday('now', '+5 minutes'));

-- +goose Down
-- A repair: nothing to undo.
SELECT 1;
