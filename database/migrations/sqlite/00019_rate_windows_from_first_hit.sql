-- +goose Up
-- The same table as on MySQL: one row per consumer, its window's start in
-- Unix seconds and its count (the windows start at a consumer's first
-- request). The old rows, a minute's worth of counts, are dropped.
DROP TABLE rate_limits;
CREATE TABLE rate_limits (
    consumer_id  TEXT    NOT NULL PRIMARY KEY,
    window_start INTEGER NOT NULL,
    hits         INTEGER NOT NULL
);
CREATE INDEX rate_limits_window_start_index ON rate_limits (window_start);

-- +goose Down
DROP TABLE rate_limits;
CREATE TABLE rate_limits (
    consumer_id  TEXT     NOT NULL,
    window_start DATETIME NOT NULL,
    hits         INTEGER  NOT NULL,
    PRIMARY KEY (consumer_id, window_start)
);
CREATE INDEX rate_limits_window_start_index ON rate_limits (window_start);
