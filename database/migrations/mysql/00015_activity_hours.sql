-- +goose Up
-- The hourly activity counters licensor keeps itself for the operator
-- console's charts (app/activity): one row per UTC hour (its start) and
-- metric. A counter's row is added to by every replica's flush (count =
-- count + the flush's, in one upsert); a gauge's (drift.mismatches) is
-- replaced. Chart data only, never read for a decision; rows older than 7
-- days are pruned (the primary key, hour first, finds them).
CREATE TABLE activity_hours (
    hour   DATETIME(6) NOT NULL,
    metric VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    count  BIGINT      NOT NULL,
    PRIMARY KEY (hour, metric)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE activity_hours;
