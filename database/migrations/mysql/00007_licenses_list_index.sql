-- +goose Up
-- The order of GET /api/licenses (created_at DESC, id DESC) per consumer: a
-- page of the list, and a cursor page's keyset (created_at, id) < (?, ?),
-- reads its rows straight from this index, with no sort of the consumer's
-- licenses (the status filter is checked on the rows it reads).
CREATE INDEX licenses_consumer_created_id_index ON licenses (consumer_id, created_at, id);

-- +goose Down
DROP INDEX licenses_consumer_created_id_index ON licenses;
