-- The users list is read in id order: user ids are UUIDv7 minted from the sign-up instant, so
-- id order is sign-up order and the primary key serves every page.
DROP INDEX IF EXISTS users_signed_up;

-- Display names searched by substring (20 §2.1 `query`) from an FTS5 trigram index. The index
-- needs an integer row key that VACUUM keeps, which `users` (keyed by project and id) has not,
-- so the names are kept in a table of their own, in step with `users` by triggers.
CREATE TABLE user_search (
    key INTEGER PRIMARY KEY,
    project_id BLOB NOT NULL,
    id BLOB NOT NULL,
    display_name TEXT NOT NULL
);
CREATE UNIQUE INDEX user_search_user ON user_search (project_id, id);
CREATE VIRTUAL TABLE user_search_fts USING fts5(
    display_name, content = 'user_search', content_rowid = 'key', tokenize = 'trigram'
);

CREATE TRIGGER user_search_added AFTER INSERT ON user_search BEGIN
    INSERT INTO user_search_fts (rowid, display_name) VALUES (new.key, new.display_name);
END;
CREATE TRIGGER user_search_removed AFTER DELETE ON user_search BEGIN
    INSERT INTO user_search_fts (user_search_fts, rowid, display_name)
    VALUES ('delete', old.key, old.display_name);
END;

CREATE TRIGGER users_search_inserted AFTER INSERT ON users WHEN new.display_name IS NOT NULL BEGIN
    INSERT INTO user_search (project_id, id, display_name)
    VALUES (new.project_id, new.id, new.display_name);
END;
CREATE TRIGGER users_search_renamed AFTER UPDATE OF display_name ON users
WHEN old.display_name IS NOT new.display_name BEGIN
    DELETE FROM user_search WHERE project_id = old.project_id AND id = old.id;
    INSERT INTO user_search (project_id, id, display_name)
    SELECT new.project_id, new.id, new.display_name WHERE new.display_name IS NOT NULL;
END;
CREATE TRIGGER users_search_deleted AFTER DELETE ON users BEGIN
    DELETE FROM user_search WHERE project_id = old.project_id AND id = old.id;
END;

INSERT INTO user_search (project_id, id, display_name)
SELECT project_id, id, display_name FROM users WHERE display_name IS NOT NULL;
