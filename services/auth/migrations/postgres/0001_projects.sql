-- Projects, their settings document, key sets and JWT signing keys.
-- project_id leads every primary key so the tables can later be sharded by project (DESIGN §9).
CREATE TABLE projects (
    id UUID PRIMARY KEY,
    display_name TEXT NOT NULL,
    -- The settings of 50 §6 / 80 §2 as JSON. Validated by the domain on every write, so the
    -- column holds only documents the current code accepts.
    settings TEXT NOT NULL,
    -- Bumped on every settings write; writers compare-and-set it so concurrent PATCHes
    -- cannot silently undo each other.
    settings_version BIGINT NOT NULL,
    created_at_millis BIGINT NOT NULL
);

-- A key set holds up to one key of each kind. Only SHA-256 hashes of keys are stored; the
-- last four characters let admins tell keys apart.
CREATE TABLE key_sets (
    project_id UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    id UUID NOT NULL,
    description TEXT NOT NULL,
    created_at_millis BIGINT NOT NULL,
    expires_at_millis BIGINT,
    revoked_at_millis BIGINT,
    client_key_hash TEXT,
    client_key_last_four TEXT,
    server_key_hash TEXT,
    server_key_last_four TEXT,
    admin_key_hash TEXT,
    admin_key_last_four TEXT,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX key_sets_client_key ON key_sets (project_id, client_key_hash);
CREATE UNIQUE INDEX key_sets_server_key ON key_sets (project_id, server_key_hash);
CREATE UNIQUE INDEX key_sets_admin_key ON key_sets (project_id, admin_key_hash);

-- ES256 key pairs, one per audience ("normal", "restricted") and generation. The newest key
-- of an audience signs; older ones stay listed in the JWKS until their tokens have expired.
CREATE TABLE signing_keys (
    project_id UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    kid TEXT NOT NULL,
    audience TEXT NOT NULL,
    -- PKCS#8 DER of the private key.
    private_key BYTEA NOT NULL,
    public_x TEXT NOT NULL,
    public_y TEXT NOT NULL,
    created_at_millis BIGINT NOT NULL,
    PRIMARY KEY (project_id, kid)
);
