-- Event plumbing every service shares; see the Postgres twin for the why.
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    project_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at_millis INTEGER NOT NULL,
    published_at_millis INTEGER
);
CREATE INDEX outbox_pending ON outbox (seq) WHERE published_at_millis IS NULL;

CREATE TABLE consumed_events (
    project_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    consumer TEXT NOT NULL,
    consumed_at_millis INTEGER NOT NULL,
    PRIMARY KEY (project_id, event_id, consumer)
);
