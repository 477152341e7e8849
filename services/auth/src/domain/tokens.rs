//! Access tokens (70 §1): ES256 JWTs signed with the project's newest key for the user's
//! audience, carrying the claims of 70 §1.1.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use uuid::Uuid;

use super::signing::{self, AUDIENCE_ANONYMOUS, AUDIENCE_NORMAL, AUDIENCE_RESTRICTED};
use crate::app::App;
use crate::error::Result;
use crate::store::SigningKey;

/// Lifetime of an access token (70 §1).
pub const ACCESS_TOKEN_SECONDS: i64 = 600;

/// Mints an access token for `user` (its server view) and session `session_id`. Anonymous,
/// restricted and other users' tokens differ in audience, issuer and signing key, so a
/// verifier that accepts one kind cannot be handed another.
pub async fn mint(app: &App, project: Uuid, user: &Value, session_id: Uuid) -> Result<String> {
    let anonymous = user["is_anonymous"].as_bool().unwrap_or(false);
    let restricted = user["is_restricted"].as_bool().unwrap_or(false);
    let (audience, aud, iss) = if anonymous {
        (
            AUDIENCE_ANONYMOUS,
            format!("{project}:anon"),
            format!(
                "{}/api/v1/projects-anonymous-users/{project}",
                app.public_url
            ),
        )
    } else if restricted {
        (
            AUDIENCE_RESTRICTED,
            format!("{project}:restricted"),
            format!(
                "{}/api/v1/projects-restricted-users/{project}",
                app.public_url
            ),
        )
    } else {
        (
            AUDIENCE_NORMAL,
            project.to_string(),
            format!("{}/api/v1/projects/{project}", app.public_url),
        )
    };
    let key = signing_key(app, project, audience).await?;
    let now = app.now() / 1000;
    let claims = json!({
        "iss": iss,
        "aud": aud,
        "sub": user["id"],
        "iat": now,
        "exp": now + ACCESS_TOKEN_SECONDS,
        "project_id": project,
        "branch_id": "main",
        "refresh_token_id": session_id,
        // Always "authenticated": the SDK (2.8.x) refuses a token with any other role, anonymous
        // users' included; they are told apart by `is_anonymous` and the audience.
        "role": "authenticated",
        "name": user["display_name"],
        "email": user["primary_email"],
        "email_verified": user["primary_email_verified"],
        "selected_team_id": user["selected_team_id"],
        "signed_up_at": user["signed_up_at_millis"].as_i64().unwrap_or(0) / 1000,
        "is_anonymous": anonymous,
        "is_restricted": restricted,
        "restricted_reason": user["restricted_reason"],
        "requires_totp_mfa": user["requires_totp_mfa"],
    });
    let header = json!({ "typ": "JWT", "alg": "ES256", "kid": key.kid });
    let mut token = URL_SAFE_NO_PAD.encode(header.to_string());
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(claims.to_string(), &mut token);
    let signature = app.key_pairs.sign(&key, token.as_bytes())?;
    token.push('.');
    URL_SAFE_NO_PAD.encode_string(signature, &mut token);
    Ok(token)
}

/// The project's newest key for `audience`. Projects made before an audience existed get its
/// first key when a token first needs it.
async fn signing_key(app: &App, project: Uuid, audience: &str) -> Result<SigningKey> {
    // signing_keys is newest first.
    let newest = |keys: Vec<SigningKey>| keys.into_iter().find(|k| k.audience == audience);
    if let Some(key) = newest(app.projects.signing_keys(project).await?) {
        return Ok(key);
    }
    // Published as soon as it is stored, even if another replica stored one too meanwhile.
    let key = signing::generate(project, audience, app.now())?;
    app.projects.insert_signing_key(&key).await?;
    Ok(key)
}
