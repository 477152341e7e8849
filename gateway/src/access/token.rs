//! Access-token verification at the gateway (70 §1.2, 80 §11.11): signature and key id first,
//! then issuer and audience, then expiry, against the project's JWKS fetched from auth and
//! cached (refetched when an unknown `kid` shows up, at most every few seconds per project).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use latchkey_proto::auth::v1::{GetJwksRequest, Jwk};
use latchkey_shared::error::ErrorCode;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AuthClient;

const JWKS_TTL: Duration = Duration::from_secs(300);
const MIN_REFETCH: Duration = Duration::from_secs(5);

/// The user a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    pub user_id: Uuid,
    pub session_id: Option<Uuid>,
    pub restricted: bool,
    /// An anonymous user's token (also restricted).
    pub anonymous: bool,
    /// `{type}` of a restricted user's token (20 §1.3).
    pub restricted_reason: serde_json::Value,
    pub issued_at_secs: i64,
    pub expires_at_secs: i64,
}

#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
    aud: String,
    iss: String,
    exp: i64,
    #[serde(default)]
    iat: i64,
    project_id: String,
    #[serde(default)]
    refresh_token_id: Option<String>,
    #[serde(default)]
    is_restricted: bool,
    #[serde(default)]
    is_anonymous: bool,
    #[serde(default)]
    restricted_reason: serde_json::Value,
}

/// How long a verified token is remembered (never past its expiry, which is checked on every
/// use). Keys are cached for longer (`JWKS_TTL`), so this changes no decision, only its cost.
const VERIFIED_TTL: Duration = Duration::from_secs(60);
/// Bound on remembered tokens; beyond it the cache is cleared rather than grown.
const MAX_VERIFIED: usize = 100_000;

pub struct TokenVerifier {
    auth: AuthClient,
    public_url: String,
    keys: Mutex<HashMap<Uuid, (Instant, Vec<Jwk>)>>,
    /// SHA-256 of a verified token → (when, the project it was checked against, its user).
    verified: Mutex<HashMap<String, (Instant, Uuid, TokenUser)>>,
}

fn unparsable() -> ApiError {
    ApiError::new(
        ErrorCode::UnparsableAccessToken,
        "The access token could not be verified.",
    )
}

/// The project a token claims (its audience), read before verification only to pick keys.
fn claimed_project(token: &str) -> Option<Uuid> {
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let aud = value.get("aud")?.as_str()?;
    let project = [":restricted", ":anon"]
        .iter()
        .find_map(|suffix| aud.strip_suffix(suffix))
        .unwrap_or(aud);
    Uuid::parse_str(project).ok()
}

impl TokenVerifier {
    pub fn new(auth: AuthClient, public_url: String) -> Self {
        Self {
            auth,
            public_url: public_url.trim_end_matches('/').to_owned(),
            keys: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashMap::new()),
        }
    }

    async fn project_keys(&self, project: Uuid, refresh: bool) -> Result<Vec<Jwk>, ApiError> {
        if let Ok(cache) = self.keys.lock() {
            if let Some((at, keys)) = cache.get(&project) {
                let fresh = at.elapsed() < JWKS_TTL;
                if fresh && (!refresh || at.elapsed() < MIN_REFETCH) {
                    return Ok(keys.clone());
                }
            }
        }
        let mut request = tonic::Request::new(GetJwksRequest {
            project_id: project.to_string(),
            include_restricted: true,
            include_anonymous: true,
        });
        request.set_timeout(latchkey_shared::grpc::DEFAULT_DEADLINE);
        let keys = match self.auth.clone().get_jwks(request).await {
            Ok(r) => r.into_inner().keys,
            Err(status) if status.code() == tonic::Code::NotFound => return Err(unparsable()),
            Err(status) => return Err(status.into()),
        };
        if let Ok(mut cache) = self.keys.lock() {
            cache.insert(project, (Instant::now(), keys.clone()));
        }
        Ok(keys)
    }

    /// Verifies `token` for a request to `header_project`.
    /// Verifies `token` for `header_project`; a token verified moments ago costs a hash and a
    /// look-up instead of an ES256 check (revocation is checked by the caller on every request).
    pub async fn verify(&self, token: &str, header_project: Uuid) -> Result<TokenUser, ApiError> {
        let digest = latchkey_shared::crypto::hash_secret(token);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        if let Ok(cache) = self.verified.lock() {
            if let Some((at, project, user)) = cache.get(&digest) {
                // Expired or other-project tokens take the full path for its exact error.
                if at.elapsed() < VERIFIED_TTL
                    && *project == header_project
                    && user.expires_at_secs > now
                {
                    return Ok(user.clone());
                }
            }
        }
        let user = self.verify_signed(token, header_project).await?;
        if let Ok(mut cache) = self.verified.lock() {
            if cache.len() >= MAX_VERIFIED {
                cache.clear();
            }
            cache.insert(digest, (Instant::now(), header_project, user.clone()));
        }
        Ok(user)
    }

    async fn verify_signed(
        &self,
        token: &str,
        header_project: Uuid,
    ) -> Result<TokenUser, ApiError> {
        let (kid, project) = named(token)?;
        let mut keys = self.project_keys(project, false).await?;
        if !keys.iter().any(|k| k.kid == kid) {
            keys = self.project_keys(project, true).await?;
        }
        let jwk = keys.iter().find(|k| k.kid == kid).ok_or_else(unparsable)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        check(
            token,
            jwk,
            &self.public_url,
            header_project,
            i64::try_from(now).unwrap_or(i64::MAX),
        )
    }
}

/// The key id and project a token names, read before anything in it is trusted, only to pick
/// the keys to verify it with. Anything but ES256 is refused here.
pub fn named(token: &str) -> Result<(String, Uuid), ApiError> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| unparsable())?;
    if header.alg != Algorithm::ES256 {
        return Err(unparsable());
    }
    let kid = header.kid.ok_or_else(unparsable)?;
    let project = claimed_project(token).ok_or_else(unparsable)?;
    Ok((kid, project))
}

/// Verifies `token` with `jwk` (the project key its `kid` names) at `now` (seconds): the
/// signature, then issuer and audience, then expiry, then the project of the request.
pub fn check(
    token: &str,
    jwk: &Jwk,
    public_url: &str,
    header_project: Uuid,
    now: i64,
) -> Result<TokenUser, ApiError> {
    let (_, project) = named(token)?;
    let key = DecodingKey::from_ec_components(&jwk.x, &jwk.y).map_err(|_| unparsable())?;
    let mut validation = Validation::new(Algorithm::ES256);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
        .map_err(|_| unparsable())?
        .claims;

    let anonymous = jwk.audience == "anonymous";
    let restricted = anonymous || jwk.audience == "restricted";
    let (aud, iss) = if anonymous {
        (
            format!("{project}:anon"),
            format!("{public_url}/api/v1/projects-anonymous-users/{project}"),
        )
    } else if restricted {
        (
            format!("{project}:restricted"),
            format!("{public_url}/api/v1/projects-restricted-users/{project}"),
        )
    } else {
        (
            project.to_string(),
            format!("{public_url}/api/v1/projects/{project}"),
        )
    };
    if claims.aud != aud
        || claims.iss != iss
        || claims.project_id != project.to_string()
        || claims.is_restricted != restricted
        || claims.is_anonymous != anonymous
    {
        return Err(unparsable());
    }
    let user_id = Uuid::parse_str(&claims.sub).map_err(|_| unparsable())?;
    if claims.exp <= now {
        return Err(ApiError::new(
            ErrorCode::AccessTokenExpired,
            "The access token has expired.",
        )
        .with_details(json!({
            "expired_at_millis": claims.exp.saturating_mul(1000),
            "project_id": project,
            "user_id": user_id,
            "refresh_token_id": claims.refresh_token_id,
        })));
    }
    if project != header_project {
        return Err(ApiError::new(
            ErrorCode::InvalidProjectForAccessToken,
            "The access token belongs to another project.",
        )
        .with_details(json!({
            "expected_project_id": header_project,
            "actual_project_id": project,
        })));
    }
    Ok(TokenUser {
        user_id,
        session_id: claims
            .refresh_token_id
            .as_deref()
            .and_then(|s| Uuid::parse_str(s).ok()),
        restricted,
        anonymous,
        restricted_reason: claims.restricted_reason,
        issued_at_secs: claims.iat,
        expires_at_secs: claims.exp,
    })
}
