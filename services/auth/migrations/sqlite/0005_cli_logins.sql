-- CLI sign-in (README "CLI sign-in"): a CLI starts a login and polls with one code while its
-- user completes it in the browser with the other. Both codes are stored as SHA-256 hashes;
-- a completed login names its user and the session that completed it, and the first poll after
-- that opens the CLI's session. When that session ends (sign-out, password change, user
-- deletion), the completed login goes with it.
CREATE TABLE cli_logins (
    project_id BLOB NOT NULL,
    id BLOB NOT NULL,
    polling_code_hash TEXT NOT NULL,
    login_code_hash TEXT NOT NULL,
    user_id BLOB,
    session_id BLOB,
    created_at_millis INTEGER NOT NULL,
    expires_at_millis INTEGER NOT NULL,
    completed_at_millis INTEGER,
    used_at_millis INTEGER,
    PRIMARY KEY (project_id, id),
    FOREIGN KEY (project_id, user_id) REFERENCES users (project_id, id) ON DELETE CASCADE,
    FOREIGN KEY (project_id, session_id) REFERENCES sessions (project_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX cli_logins_polling ON cli_logins (project_id, polling_code_hash);
CREATE UNIQUE INDEX cli_logins_login ON cli_logins (project_id, login_code_hash);
CREATE INDEX cli_logins_expiry ON cli_logins (project_id, expires_at_millis);
