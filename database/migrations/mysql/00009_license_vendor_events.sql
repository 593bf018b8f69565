-- +goose Up
-- vendor_event_at is the time (the vendor's "created") of the last vendor
-- event applied to the license: an older event changes nothing, so webhooks
-- delivered out of order never move a license back. A license may now also
-- be "suspended" (its site suspended at the vendor); status is a VARCHAR(16),
-- so that needs no schema change. Webhooks find a license by its site.
ALTER TABLE licenses
    ADD COLUMN vendor_event_at DATETIME(6) NULL AFTER revoked_at,
    ADD KEY licenses_vendor_site_id_index (vendor_site_id);

-- +goose Down
ALTER TABLE licenses
    DROP KEY licenses_vendor_site_id_index,
    DROP COLUMN vendor_event_at;
