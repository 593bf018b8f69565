-- +goose Up
-- vendor_event_at is the time (the vendor's "created") of the last vendor
-- event applied to the license: an older event changes nothing, so webhooks
-- delivered out of order never move a license back. A license may now also
-- be "suspended" (its site suspended at the vendor); status takes any short
-- text, so that needs no schema change. Webhooks find a license by its site.
ALTER TABLE licenses ADD COLUMN vendor_event_at DATETIME NULL;
CREATE INDEX licenses_vendor_site_id_index ON licenses (vendor_site_id);

-- +goose Down
DROP INDEX licenses_vendor_site_id_index;
ALTER TABLE licenses DROP COLUMN vendor_event_at;
