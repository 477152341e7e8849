-- Contact values searched by substring (20 §2.1 `query`) from an FTS5 trigram index. The index
-- needs an integer row key that VACUUM keeps, which `channels` (keyed by project and id) has
-- not, so the values are kept in a table of their own, in step with `channels` by triggers.
CREATE TABLE channel_search (
    key INTEGER PRIMARY KEY,
    project_id BLOB NOT NULL,
    id BLOB NOT NULL,
    user_id BLOB NOT NULL,
    value TEXT NOT NULL
);
CREATE UNIQUE INDEX channel_search_channel ON channel_search (project_id, id);
CREATE VIRTUAL TABLE channel_search_fts USING fts5(
    value, content = 'channel_search', content_rowid = 'key', tokenize = 'trigram'
);

CREATE TRIGGER channel_search_added AFTER INSERT ON channel_search BEGIN
    INSERT INTO channel_search_fts (rowid, value) VALUES (new.key, new.value);
END;
CREATE TRIGGER channel_search_removed AFTER DELETE ON channel_search BEGIN
    INSERT INTO channel_search_fts (channel_search_fts, rowid, value)
    VALUES ('delete', old.key, old.value);
END;

CREATE TRIGGER channels_search_inserted AFTER INSERT ON channels BEGIN
    INSERT INTO channel_search (project_id, id, user_id, value)
    VALUES (new.project_id, new.id, new.user_id, new.value);
END;
CREATE TRIGGER channels_search_changed AFTER UPDATE OF value, user_id ON channels
WHEN old.value IS NOT new.value OR old.user_id IS NOT new.user_id BEGIN
    DELETE FROM channel_search WHERE project_id = old.project_id AND id = old.id;
    INSERT INTO channel_search (project_id, id, user_id, value)
    VALUES (new.project_id, new.id, new.user_id, new.value);
END;
CREATE TRIGGER channels_search_deleted AFTER DELETE ON channels BEGIN
    DELETE FROM channel_search WHERE project_id = old.project_id AND id = old.id;
END;

INSERT INTO channel_search (project_id, id, user_id, value)
SELECT project_id, id, user_id, value FROM channels;
