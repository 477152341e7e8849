-- Anonymous users (README "Anonymous users"): made by `POST /auth/anonymous/sign-up`, upgraded in
-- place when they sign up for real. Lists page through anonymous users and the others from
-- indexes of their own (ids are minted from the sign-up instant, so id order is sign-up order),
-- so neither kind is read to be dropped; the anonymous one also serves the sweep that deletes
-- those older than a project's `anonymous_user_max_age_seconds`, oldest first.
ALTER TABLE users ADD COLUMN is_anonymous BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX users_anonymous ON users (project_id, id) WHERE is_anonymous;
CREATE INDEX users_known ON users (project_id, id) WHERE NOT is_anonymous;
