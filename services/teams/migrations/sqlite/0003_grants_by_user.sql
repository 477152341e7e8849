-- A user's team permission grants (permission checks, `GET /team-permissions?user_id=`) are
-- read from an index instead of the project's grants.
CREATE INDEX team_permissions_user ON team_permissions (project_id, user_id);
