-- Event plumbing every service shares (appended to each service's own migrations).
-- outbox: a change and its event commit in one transaction; the relay publishes rows in `seq`
-- order and stamps `published_at_millis` only after the broker confirmed them.
CREATE TABLE outbox (
    seq BIGSERIAL PRIMARY KEY,
    id UUID NOT NULL UNIQUE,
    project_id UUID NOT NULL,
    event_type TEXT NOT NULL,
    -- The whole event envelope as JSON, exactly as it goes on the bus.
    body TEXT NOT NULL,
    created_at_millis BIGINT NOT NULL,
    published_at_millis BIGINT
);
CREATE INDEX outbox_pending ON outbox (seq) WHERE published_at_millis IS NULL;

-- consumed_events: which events a consumer has already handled, so redeliveries are no-ops.
CREATE TABLE consumed_events (
    project_id UUID NOT NULL,
    event_id UUID NOT NULL,
    consumer TEXT NOT NULL,
    consumed_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, event_id, consumer)
);
