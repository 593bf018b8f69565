-- +goose Up
-- event_sequence counts the consumer events of a license: each change that
-- writes one (created, revoked, suspended, reactivated, key rotated) adds one
-- to it in the same UPDATE, and the event carries the new value, so that a
-- consumer can order a license's events and drop a stale one.
ALTER TABLE licenses
    ADD COLUMN event_sequence INT UNSIGNED NOT NULL DEFAULT 0 AFTER intent_id;

-- The consumer events: the outbox. Each row is written in the same
-- transaction as the change it describes (a license's, or a webhook
-- endpoint's disabling); data is the event's "data" object, as JSON sealed
-- under APP_KEY (a license carries its key). position is the feed's order,
-- NULL until the dispatcher, one at a time across replicas, numbers the
-- committed events and fans each out to its consumer's endpoints in one
-- transaction: an event is in the feed and owed to its endpoints together,
-- and positions are handed out in commit order, so a feed read after a
-- position never misses an event committed late under a lower id. It has
-- the indexes its readers need and no more (every license change pays for
-- each): none on the time (the pruner reads by id) and none on the subject.
CREATE TABLE consumer_events (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    public_id   CHAR(30)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    consumer_id CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    type        VARCHAR(40)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    subject_id  CHAR(26)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sequence    INT UNSIGNED NOT NULL,
    data        MEDIUMTEXT   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    position    BIGINT UNSIGNED NULL,
    created_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY consumer_events_public_id_unique (public_id),
    UNIQUE KEY consumer_events_position_unique (position),
    KEY consumer_events_feed_index (consumer_id, position)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The dispatcher's one row: the last position handed out. Locking it makes
-- one dispatcher run at a time, whichever replica.
CREATE TABLE event_dispatcher (
    id            TINYINT UNSIGNED NOT NULL,
    last_position BIGINT UNSIGNED  NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB;
INSERT INTO event_dispatcher (id, last_position) VALUES (1, 0);

-- A consumer's webhook endpoints. events is a JSON array of the event types
-- it takes ("license.*" for every license event); secret signs what is sent
-- to it, sealed under APP_KEY. failing_since is when its deliveries began to
-- fail with none delivered since; an endpoint failing for WEBHOOK_RETRY_FOR
-- is disabled (enabled = 0, disabled_at, disabled_reason).
CREATE TABLE webhook_endpoints (
    id              CHAR(26)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    consumer_id     CHAR(26)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    url             VARCHAR(2048) NOT NULL,
    description     VARCHAR(500)  NOT NULL DEFAULT '',
    events          TEXT          NOT NULL,
    secret          TEXT          CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    enabled         TINYINT(1)    NOT NULL DEFAULT 1,
    failing_since   DATETIME(6)   NULL,
    disabled_at     DATETIME(6)   NULL,
    disabled_reason VARCHAR(255)  NULL,
    event_sequence  INT UNSIGNED  NOT NULL DEFAULT 0,
    created_at      DATETIME(6)   NOT NULL,
    updated_at      DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    KEY webhook_endpoints_consumer_index (consumer_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One event owed to one endpoint. pending until a 2xx (delivered) or until
-- its retries ran out (failed). A pending delivery is due at
-- next_attempt_at; a worker claims it by moving next_attempt_at past its
-- lease and writing its claim, so a worker that dies mid-delivery leaves it
-- due again once the lease ends. Retries run until window_start +
-- WEBHOOK_RETRY_FOR (a manual retry starts a new window).
CREATE TABLE webhook_deliveries (
    id              CHAR(26)        CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    endpoint_id     CHAR(26)        CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    event_id        BIGINT UNSIGNED NOT NULL,
    consumer_id     CHAR(26)        CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    status          VARCHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempts        INT UNSIGNED    NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(6)     NULL,
    claim           CHAR(26)        CHARACTER SET ascii COLLATE ascii_bin NULL,
    window_start    DATETIME(6)     NOT NULL,
    last_status     SMALLINT        NULL,
    delivered_at    DATETIME(6)     NULL,
    created_at      DATETIME(6)     NOT NULL,
    updated_at      DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY webhook_deliveries_endpoint_event_unique (endpoint_id, event_id),
    KEY webhook_deliveries_due_index (status, next_attempt_at),
    KEY webhook_deliveries_consumer_index (consumer_id, status),
    KEY webhook_deliveries_event_index (event_id)
) ENGINE=InnoDB;

-- Each attempt at a delivery: the answer's status (NULL: no answer), how
-- long it took, and why it failed when it did (never the answer's body).
CREATE TABLE webhook_attempts (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    delivery_id     CHAR(26)        CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempted_at    DATETIME(6)     NOT NULL,
    response_status SMALLINT        NULL,
    duration_ms     INT UNSIGNED    NOT NULL,
    error           VARCHAR(255)    NULL,
    PRIMARY KEY (id),
    KEY webhook_attempts_delivery_index (delivery_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
DROP TABLE event_dispatcher;
DROP TABLE consumer_events;
ALTER TABLE licenses DROP COLUMN event_sequence;
