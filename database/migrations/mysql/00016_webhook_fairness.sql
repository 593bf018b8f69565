-- +goose Up
-- Fair delivery. A worker claims due deliveries endpoint by endpoint, the
-- endpoint served longest ago first (last_claimed_at), with a cap on the
-- attempts in flight to one endpoint; the new index finds an endpoint's due
-- deliveries, and its in-flight ones, without reading any other endpoint's.
-- An endpoint whose attempts keep timing out is paused as a whole
-- (consecutive_timeouts, paused_until: a circuit breaker), and a consumer's
-- own retry of a delivery is let through once a minute per endpoint
-- (retried_at).
ALTER TABLE webhook_endpoints
    ADD COLUMN last_claimed_at      DATETIME(6)  NULL,
    ADD COLUMN consecutive_timeouts INT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN paused_until         DATETIME(6)  NULL,
    ADD COLUMN retried_at           DATETIME(6)  NULL;
CREATE INDEX webhook_deliveries_endpoint_due_index ON webhook_deliveries (endpoint_id, status, next_attempt_at);

-- +goose Down
DROP INDEX webhook_deliveries_endpoint_due_index ON webhook_deliveries;
ALTER TABLE webhook_endpoints
    DROP COLUMN retried_at,
    DROP COLUMN paused_until,
    DROP COLUMN consecutive_timeouts,
    DROP COLUMN last_claimed_at;
