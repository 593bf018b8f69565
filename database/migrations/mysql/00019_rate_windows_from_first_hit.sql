-- +goose Up
-- The rate limit's windows start at a consumer's first request and last
-- 60 s (Laravel's RateLimiter), instead of clock minutes: one row per
-- consumer, window_start its window's start in Unix seconds, hits its count.
-- The counters are a minute's worth of data: the old rows are dropped.
DROP TABLE rate_limits;
CREATE TABLE rate_limits (
    consumer_id  CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    window_start BIGINT       NOT NULL,
    hits         INT UNSIGNED NOT NULL,
    PRIMARY KEY (consumer_id),
    KEY rate_limits_window_start_index (window_start)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE rate_limits;
CREATE TABLE rate_limits (
    consumer_id  CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    window_start DATETIME     NOT NULL,
    hits         INT UNSIGNED NOT NULL,
    PRIMARY KEY (consumer_id, window_start),
    KEY rate_limits_window_start_index (window_start)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
