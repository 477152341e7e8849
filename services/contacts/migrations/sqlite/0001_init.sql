-- The contacts service's own schema starts here; its tables arrive with the issues that give the
-- service behaviour. The shared event tables (outbox, consumed_events) are appended to this
-- history by latchkey-shared (versions 900000+).
SELECT 1;
