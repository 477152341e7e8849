-- Users and their sessions. E-mail addresses live in the contacts service; the user row keeps
-- what only auth decides (password, flags, metadata).
CREATE TABLE users (
    project_id UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    id UUID NOT NULL,
    display_name TEXT,
    profile_image_url TEXT,
    -- Metadata values are any JSON, stored as text so both backends keep them verbatim.
    client_metadata TEXT NOT NULL,
    client_read_only_metadata TEXT NOT NULL,
    server_metadata TEXT NOT NULL,
    -- argon2id PHC string, or an imported bcrypt hash; NULL when the user has no password.
    password_hash TEXT,
    otp_auth_enabled BOOLEAN NOT NULL,
    selected_team_id UUID,
    restricted_by_admin BOOLEAN NOT NULL,
    restricted_by_admin_reason TEXT,
    restricted_by_admin_private_details TEXT,
    country_code TEXT,
    risk_score_bot INTEGER NOT NULL,
    risk_score_free_trial_abuse INTEGER NOT NULL,
    signed_up_at_millis BIGINT NOT NULL,
    last_active_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX users_signed_up ON users (project_id, signed_up_at_millis, id);

-- A session is one sign-in; its access tokens carry its id as refresh_token_id.
CREATE TABLE sessions (
    project_id UUID NOT NULL,
    id UUID NOT NULL,
    user_id UUID NOT NULL,
    is_impersonation BOOLEAN NOT NULL,
    created_at_millis BIGINT NOT NULL,
    last_used_at_millis BIGINT NOT NULL,
    expires_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, id),
    FOREIGN KEY (project_id, user_id) REFERENCES users (project_id, id) ON DELETE CASCADE
);
CREATE INDEX sessions_user ON sessions (project_id, user_id);

-- Refresh tokens of a session, as SHA-256 hashes. Without rotation a session has one; with
-- rotation (80 §5) each refresh adds one and marks the presented one superseded, which keeps
-- working for a short grace period and revokes the session when presented after it.
CREATE TABLE refresh_tokens (
    project_id UUID NOT NULL,
    token_hash TEXT NOT NULL,
    session_id UUID NOT NULL,
    created_at_millis BIGINT NOT NULL,
    superseded_at_millis BIGINT,
    PRIMARY KEY (project_id, token_hash),
    FOREIGN KEY (project_id, session_id) REFERENCES sessions (project_id, id) ON DELETE CASCADE
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (project_id, session_id);
