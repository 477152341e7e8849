-- Teams, memberships (with the member's per-team profile) and direct permission grants.
CREATE TABLE teams (
    project_id BLOB NOT NULL,
    id BLOB NOT NULL,
    display_name TEXT NOT NULL,
    profile_image_url TEXT,
    client_metadata TEXT NOT NULL,
    client_read_only_metadata TEXT NOT NULL,
    server_metadata TEXT NOT NULL,
    created_at_millis INTEGER NOT NULL,
    PRIMARY KEY (project_id, id)
);

CREATE TABLE memberships (
    project_id BLOB NOT NULL,
    team_id BLOB NOT NULL,
    user_id BLOB NOT NULL,
    -- The member profile (30 §3); NULL falls back to the user's own values.
    display_name TEXT,
    profile_image_url TEXT,
    created_at_millis INTEGER NOT NULL,
    PRIMARY KEY (project_id, team_id, user_id),
    FOREIGN KEY (project_id, team_id) REFERENCES teams (project_id, id) ON DELETE CASCADE
);
CREATE INDEX memberships_user ON memberships (project_id, user_id);

-- Only direct grants are stored; containment is expanded when read (50 §1).
CREATE TABLE team_permissions (
    project_id BLOB NOT NULL,
    team_id BLOB NOT NULL,
    user_id BLOB NOT NULL,
    permission_id TEXT NOT NULL,
    PRIMARY KEY (project_id, team_id, user_id, permission_id),
    FOREIGN KEY (project_id, team_id, user_id)
        REFERENCES memberships (project_id, team_id, user_id) ON DELETE CASCADE
);
