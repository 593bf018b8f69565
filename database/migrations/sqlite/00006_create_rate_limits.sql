-- +goose Up
-- The same table as on MySQL, so that both schemas match; on SQLite (one
-- process) the rate limiter counts in memory and leaves it empty.
CREATE TABLE rate_limits (
    consumer_id  TEXT     NOT NULL,
    window_start DATETIME NOT NULL,
    hits         INTEGER  NOT NULL,
    PRIMARY KEY (consumer_id, window_start)
);
CREATE INDEX rate_limits_window_start_index ON rate_limits (window_start);

-- +goose Down
DROP TABLE rate_limits;
