-- Webhook endpoints of each project (80 §7). The signing secret must be usable to sign, so it is
-- stored as issued; during a rotation the previous one keeps signing until it expires.
CREATE TABLE endpoints (
    project_id UUID NOT NULL,
    id UUID NOT NULL,
    url TEXT NOT NULL,
    description TEXT NOT NULL,
    -- JSON array of event types, or NULL for all of them.
    event_types TEXT,
    enabled BOOLEAN NOT NULL,
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_secret_expires_at_millis BIGINT,
    created_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, id)
);

-- One message per event (or test event); its id is the webhook-id every retry repeats.
CREATE TABLE messages (
    project_id UUID NOT NULL,
    id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    -- The exact body sent: {"type": …, "data": …}.
    body TEXT NOT NULL,
    created_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, id)
);

-- A message owed to one endpoint: pending until a 2xx answer, failed after the last retry.
CREATE TABLE deliveries (
    project_id UUID NOT NULL,
    endpoint_id UUID NOT NULL,
    message_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt_count INTEGER NOT NULL,
    next_attempt_at_millis BIGINT,
    created_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, endpoint_id, message_id),
    FOREIGN KEY (project_id, endpoint_id) REFERENCES endpoints (project_id, id) ON DELETE CASCADE
);
CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at_millis);
CREATE INDEX deliveries_endpoint ON deliveries (project_id, endpoint_id, created_at_millis);

-- Every attempt, for the deliveries list.
CREATE TABLE attempts (
    project_id UUID NOT NULL,
    endpoint_id UUID NOT NULL,
    message_id TEXT NOT NULL,
    at_millis BIGINT NOT NULL,
    response_status INTEGER,
    error TEXT,
    duration_ms BIGINT NOT NULL,
    FOREIGN KEY (project_id, endpoint_id, message_id)
        REFERENCES deliveries (project_id, endpoint_id, message_id) ON DELETE CASCADE
);
CREATE INDEX attempts_delivery ON attempts (project_id, endpoint_id, message_id, at_millis);
