-- Passkeys (README "Passkeys"): WebAuthn credentials a signed-in user registered. A credential
-- is public (an id, a public key and its settings, serialized by webauthn-rs), so it is stored
-- as it is; the signature counter has a column of its own because each sign-in advances it
-- with a compare-and-set. `users.passkey_auth_enabled` says whether the user has one and is
-- written in the same transaction as the credentials, so the user row alone answers it.
ALTER TABLE users ADD COLUMN passkey_auth_enabled BOOLEAN NOT NULL DEFAULT FALSE;
CREATE TABLE passkeys (
    project_id UUID NOT NULL,
    id UUID NOT NULL,
    user_id UUID NOT NULL,
    -- base64url of the credential id the authenticator chose.
    credential_id TEXT NOT NULL,
    credential TEXT NOT NULL,
    sign_count BIGINT NOT NULL,
    created_at_millis BIGINT NOT NULL,
    last_used_at_millis BIGINT,
    PRIMARY KEY (project_id, id),
    FOREIGN KEY (project_id, user_id) REFERENCES users (project_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX passkeys_credential ON passkeys (project_id, credential_id);
CREATE INDEX passkeys_user ON passkeys (project_id, user_id);
