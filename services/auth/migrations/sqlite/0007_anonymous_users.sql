-- Anonymous users (README "Anonymous users"): made by `POST /auth/anonymous/sign-up`, upgraded in
-- place when they sign up for real. The partial index serves the sweep that deletes those older
-- than a project's `anonymous_user_max_age_seconds`, oldest first.
ALTER TABLE users ADD COLUMN is_anonymous BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX users_anonymous ON users (project_id, signed_up_at_millis) WHERE is_anonymous;
