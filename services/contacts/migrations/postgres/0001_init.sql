-- Contact channels: a user's e-mail addresses. The user's primary e-mail and its flags are
-- derived from the channel with is_primary (20 §1.4).
CREATE TABLE channels (
    project_id UUID NOT NULL,
    id UUID NOT NULL,
    user_id UUID NOT NULL,
    value TEXT NOT NULL,
    used_for_auth BOOLEAN NOT NULL,
    is_verified BOOLEAN NOT NULL,
    is_primary BOOLEAN NOT NULL,
    created_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, id)
);
-- A user holds an address once (CONTACT_CHANNEL_ALREADY_EXISTS).
CREATE UNIQUE INDEX channels_user_value ON channels (project_id, user_id, value);
-- An address signs in one user only; the index makes the rule hold under concurrency.
CREATE UNIQUE INDEX channels_auth_value ON channels (project_id, value) WHERE used_for_auth;
-- At most one primary channel per user.
CREATE UNIQUE INDEX channels_primary ON channels (project_id, user_id) WHERE is_primary;

-- Outgoing mail (80 §4). Bodies hold live codes, so they are kept only in dev-mailbox mode.
CREATE TABLE emails (
    project_id UUID NOT NULL,
    id UUID NOT NULL,
    recipient TEXT NOT NULL,
    subject TEXT NOT NULL,
    template TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    text_body TEXT,
    html_body TEXT,
    created_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, id)
);
