-- +goose Up
-- The hourly activity counters licensor keeps itself for the operator
-- console's charts (app/activity): one row per UTC hour (its start) and
-- metric. A counter's row is added to by every replica's flush (count =
-- count + the flush's); a gauge's (drift.mismatches) is replaced. Chart data
-- only, never read for a decision; rows older than 7 days are pruned.
CREATE TABLE activity_hours (
    hour   DATETIME    NOT NULL,
    metric VARCHAR(64) NOT NULL,
    count  INTEGER     NOT NULL,
    PRIMARY KEY (hour, metric)
);

-- +goose Down
DROP TABLE activity_hours;
