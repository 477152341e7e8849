-- One-time codes (70 §4), shared by every service that issues them (auth: password reset, OTP
-- sign-in, MFA attempts; contacts: e-mail verification; teams: invitations). Only SHA-256
-- hashes of codes are stored. `nonce_hash` hashes the last 39 characters, which OTP codes share
-- with the nonce returned to the client, so attempts are counted per nonce (70 §4.2).
CREATE TABLE verification_codes (
    project_id UUID NOT NULL,
    id UUID NOT NULL,
    kind TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    nonce_hash TEXT NOT NULL,
    -- What the code is for (user id, e-mail, callback URL…), as JSON.
    data TEXT NOT NULL,
    created_at_millis BIGINT NOT NULL,
    expires_at_millis BIGINT NOT NULL,
    used_at_millis BIGINT,
    attempts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (project_id, id)
);
CREATE UNIQUE INDEX verification_codes_value ON verification_codes (project_id, code_hash);
CREATE INDEX verification_codes_nonce ON verification_codes (project_id, nonce_hash);
