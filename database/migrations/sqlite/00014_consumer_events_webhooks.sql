-- +goose Up
-- event_sequence counts the consumer events of a license: each change that
-- writes one (created, revoked, suspended, reactivated, key rotated) adds one
-- to it in the same UPDATE, and the event carries the new value, so that a
-- consumer can order a license's events and drop a stale one.
ALTER TABLE licenses ADD COLUMN event_sequence INTEGER NOT NULL DEFAULT 0;

-- The consumer events: the outbox. Each row is written in the same
-- transaction as the change it describes (a license's, or a webhook
-- endpoint's disabling); data is the event's "data" object, as JSON sealed
-- under APP_KEY (a license carries its key). position is the feed's order,
-- NULL until the dispatcher, one at a time, numbers the committed events and
-- fans each out to its consumer's endpoints in one transaction: an event is
-- in the feed and owed to its endpoints together, and positions are handed
-- out in commit order, so a feed read after a position never misses an
-- event committed late under a lower id. It has the indexes its readers
-- need and no more (every license change pays for each): none on the time
-- (the pruner reads by id) and none on the subject, nor on position: on
-- SQLite, with one writer at a time, events commit in the order of their
-- ids, so the dispatcher reads on from the last id it numbered
-- (event_dispatcher.last_event_id; AUTOINCREMENT keeps every id above it).
CREATE TABLE consumer_events (
    id          INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    public_id   TEXT     NOT NULL,
    consumer_id TEXT     NOT NULL,
    type        TEXT     NOT NULL,
    subject_id  TEXT     NOT NULL,
    sequence    INTEGER  NOT NULL,
    data        TEXT     NOT NULL,
    position    INTEGER  NULL,
    created_at  DATETIME NOT NULL
);
-- The feed's indexes hold the dispatched events only: a change's INSERT
-- writes the table alone, and the dispatcher, off the change's path, adds
-- each event to them as it numbers it. (The feed reads dispatched events
-- only, and says so: position IS NOT NULL.)
CREATE UNIQUE INDEX consumer_events_public_id_unique ON consumer_events (public_id) WHERE position IS NOT NULL;
CREATE INDEX consumer_events_feed_index ON consumer_events (consumer_id, position) WHERE position IS NOT NULL;

-- The dispatcher's one row: the last position handed out, and the id of
-- the last event numbered.
CREATE TABLE event_dispatcher (
    id            INTEGER NOT NULL PRIMARY KEY,
    last_position INTEGER NOT NULL,
    last_event_id INTEGER NOT NULL DEFAULT 0
);
INSERT INTO event_dispatcher (id, last_position) VALUES (1, 0);

-- A consumer's webhook endpoints. events is a JSON array of the event types
-- it takes ("license.*" for every license event); secret signs what is sent
-- to it, sealed under APP_KEY. failing_since is when its deliveries began to
-- fail with none delivered since; an endpoint failing for WEBHOOK_RETRY_FOR
-- is disabled (enabled = 0, disabled_at, disabled_reason).
CREATE TABLE webhook_endpoints (
    id              TEXT     NOT NULL PRIMARY KEY,
    consumer_id     TEXT     NOT NULL,
    url             TEXT     NOT NULL,
    description     TEXT     NOT NULL DEFAULT '',
    events          TEXT     NOT NULL,
    secret          TEXT     NOT NULL,
    enabled         BOOLEAN  NOT NULL DEFAULT 1,
    failing_since   DATETIME NULL,
    disabled_at     DATETIME NULL,
    disabled_reason TEXT     NULL,
    event_sequence  INTEGER  NOT NULL DEFAULT 0,
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL
);
CREATE INDEX webhook_endpoints_consumer_index ON webhook_endpoints (consumer_id, created_at);

-- One event owed to one endpoint. pending until a 2xx (delivered) or until
-- its retries ran out (failed). A pending delivery is due at
-- next_attempt_at; a worker claims it by moving next_attempt_at past its
-- lease and writing its claim, so a worker that dies mid-delivery leaves it
-- due again once the lease ends. Retries run until window_start +
-- WEBHOOK_RETRY_FOR (a manual retry starts a new window).
CREATE TABLE webhook_deliveries (
    id              TEXT     NOT NULL PRIMARY KEY,
    endpoint_id     TEXT     NOT NULL,
    event_id        INTEGER  NOT NULL,
    consumer_id     TEXT     NOT NULL,
    status          TEXT     NOT NULL,
    attempts        INTEGER  NOT NULL DEFAULT 0,
    next_attempt_at DATETIME NULL,
    claim           TEXT     NULL,
    window_start    DATETIME NOT NULL,
    last_status     INTEGER  NULL,
    delivered_at    DATETIME NULL,
    created_at      DATETIME NOT NULL,
    updated_at      DATETIME NOT NULL
);
CREATE UNIQUE INDEX webhook_deliveries_endpoint_event_unique ON webhook_deliveries (endpoint_id, event_id);
CREATE INDEX webhook_deliveries_due_index ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_consumer_index ON webhook_deliveries (consumer_id, status);
CREATE INDEX webhook_deliveries_event_index ON webhook_deliveries (event_id);

-- Each attempt at a delivery: the answer's status (NULL: no answer), how
-- long it took, and why it failed when it did (never the answer's body).
CREATE TABLE webhook_attempts (
    id              INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    delivery_id     TEXT     NOT NULL,
    attempted_at    DATETIME NOT NULL,
    response_status INTEGER  NULL,
    duration_ms     INTEGER  NOT NULL,
    error           TEXT     NULL
);
CREATE INDEX webhook_attempts_delivery_index ON webhook_attempts (delivery_id, id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
DROP TABLE event_dispatcher;
DROP TABLE consumer_events;
ALTER TABLE licenses DROP COLUMN event_sequence;
