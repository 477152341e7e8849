-- TOTP (10 §3): the raw secret, base64, because codes are computed from it; the last accepted
-- time step, so that one code is never accepted twice.
ALTER TABLE users ADD COLUMN totp_secret TEXT;
ALTER TABLE users ADD COLUMN totp_last_step BIGINT;

-- Provider accounts linked to users (10 §5). Provider tokens are kept for connected accounts
-- (10 §6): they are credentials toward the provider, so they are never returned by reads.
CREATE TABLE oauth_accounts (
    project_id UUID NOT NULL,
    id UUID NOT NULL,
    user_id UUID NOT NULL,
    provider_id TEXT NOT NULL,
    provider_type TEXT NOT NULL,
    account_id TEXT NOT NULL,
    email TEXT,
    allow_sign_in BOOLEAN NOT NULL,
    allow_connected_accounts BOOLEAN NOT NULL,
    access_token TEXT,
    refresh_token TEXT,
    access_token_expires_at_millis BIGINT,
    scopes TEXT NOT NULL,
    created_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, id),
    FOREIGN KEY (project_id, user_id) REFERENCES users (project_id, id) ON DELETE CASCADE
);
CREATE INDEX oauth_accounts_account ON oauth_accounts (project_id, provider_id, account_id);
CREATE UNIQUE INDEX oauth_accounts_user ON oauth_accounts (project_id, user_id, provider_id, account_id);
