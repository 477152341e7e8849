-- The users list is read in id order: user ids are UUIDv7 minted from the sign-up instant, so
-- id order is sign-up order and the primary key serves every page.
DROP INDEX IF EXISTS users_signed_up;
-- Display names searched by substring (20 §2.1 `query`) from a trigram index. pg_trgm is a
-- trusted contrib extension: the database's owner may create it.
-- Without the pending list (fastupdate), which every search would scan until a vacuum merges
-- it: a search costs the same at any time, an insert a little more.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX users_display_name_trgm ON users USING gin (lower(display_name) gin_trgm_ops)
    WITH (fastupdate = off);
