-- +goose Up
-- The per-consumer request counters of RATE_LIMIT_PER_MINUTE: one row per
-- consumer and fixed one-minute window, counted by one upsert per request
-- and shared by every replica on this database. Rows of windows that are
-- over are deleted in small batches (window_start's index finds them).
-- No foreign key: a counter is never worth a lookup in consumers, and the
-- rows of a deleted consumer age out with their window.
CREATE TABLE rate_limits (
    consumer_id  CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    window_start DATETIME     NOT NULL,
    hits         INT UNSIGNED NOT NULL,
    PRIMARY KEY (consumer_id, window_start),
    KEY rate_limits_window_start_index (window_start)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE rate_limits;
