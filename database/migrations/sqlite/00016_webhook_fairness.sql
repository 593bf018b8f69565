-- +goose Up
-- Fair delivery. A worker claims due deliveries endpoint by endpoint, the
-- endpoint served longest ago first (last_claimed_at), with a cap on the
-- attempts in flight to one endpoint; the new index finds an endpoint's due
-- deliveries, and its in-flight ones, without reading any other endpoint's.
-- An endpoint whose attempts keep timing out is paused as a whole
-- (consecutive_timeouts, paused_until: a circuit breaker), and a consumer's
-- own retry of a delivery is let through once a minute per endpoint
-- (retried_at).
ALTER TABLE webhook_endpoints ADD COLUMN last_claimed_at DATETIME NULL;
ALTER TABLE webhook_endpoints ADD COLUMN consecutive_timeouts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN paused_until DATETIME NULL;
ALTER TABLE webhook_endpoints ADD COLUMN retried_at DATETIME NULL;
CREATE INDEX webhook_deliveries_endpoint_due_index ON webhook_deliveries (endpoint_id, status, next_attempt_at);

-- +goose Down
DROP INDEX webhook_deliveries_endpoint_due_index;
ALTER TABLE webhook_endpoints DROP COLUMN retried_at;
ALTER TABLE webhook_endpoints DROP COLUMN paused_until;
ALTER TABLE webhook_endpoints DROP COLUMN consecutive_timeouts;
ALTER TABLE webhook_endpoints DROP COLUMN last_claimed_at;
