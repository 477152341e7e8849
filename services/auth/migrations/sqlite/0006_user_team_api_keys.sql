-- API keys of users and teams (README "User and team API keys"), kept by auth beside the
-- project's own keys: a SHA-256 hash of the secret and its last four characters, never the
-- secret. A user's keys go with the user; a team's are deleted when auth hears the team is
-- gone, and until then every read asks teams whether it still exists.
CREATE TABLE owned_api_keys (
    project_id BLOB NOT NULL,
    id BLOB NOT NULL,
    user_id BLOB,
    team_id BLOB,
    description TEXT NOT NULL,
    is_public BOOLEAN NOT NULL,
    secret_hash TEXT NOT NULL,
    last_four TEXT NOT NULL,
    created_at_millis INTEGER NOT NULL,
    expires_at_millis INTEGER,
    revoked_at_millis INTEGER,
    PRIMARY KEY (project_id, id),
    CHECK ((user_id IS NULL) <> (team_id IS NULL)),
    FOREIGN KEY (project_id, user_id) REFERENCES users (project_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX owned_api_keys_secret ON owned_api_keys (project_id, secret_hash);
CREATE INDEX owned_api_keys_user ON owned_api_keys (project_id, user_id);
CREATE INDEX owned_api_keys_team ON owned_api_keys (project_id, team_id);
