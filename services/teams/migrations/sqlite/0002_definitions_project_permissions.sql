-- Custom permission definitions per project (50 §4). A project without a row in
-- definition_sets uses the defaults (team_member, team_admin); the first change writes the
-- defaults out, so every later read sees one consistent set.
CREATE TABLE definition_sets (
    project_id BLOB PRIMARY KEY
);

CREATE TABLE permission_definitions (
    project_id BLOB NOT NULL,
    id TEXT NOT NULL,
    -- "team" or "project"; ids are unique across both scopes.
    scope TEXT NOT NULL,
    description TEXT,
    -- JSON array of contained permission ids.
    contained TEXT NOT NULL,
    PRIMARY KEY (project_id, id)
);

-- Direct project-wide grants (50 §3).
CREATE TABLE project_permissions (
    project_id BLOB NOT NULL,
    user_id BLOB NOT NULL,
    permission_id TEXT NOT NULL,
    PRIMARY KEY (project_id, user_id, permission_id)
);
