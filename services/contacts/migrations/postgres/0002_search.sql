-- Contact values searched by substring (20 §2.1 `query`) from a trigram index; values are
-- stored lower-case. pg_trgm is a trusted contrib extension: the database's owner may create it.
-- Without the pending list (fastupdate), which every search would scan until a vacuum merges
-- it: a search costs the same at any time, an insert a little more.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX channels_value_trgm ON channels USING gin (value gin_trgm_ops) WITH (fastupdate = off);
