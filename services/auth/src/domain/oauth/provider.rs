//! Talking to an OAuth provider as its client (the "inner" flow of 10 §4): where its endpoints
//! are, the authorization URL, the code exchange, and who the signed-in account is.
//!
//! Named types carry their public endpoints; a deployment may override any of them per
//! provider (80 §9), which is also how tests stand in for a real provider. `oidc` providers
//! are found through their discovery document.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use latchkey_shared::error::ErrorCode;
use serde_json::Value;

use crate::domain::settings::OAuthProvider;
use crate::error::{coded, Error, Result};

/// Where a provider answers and how its userinfo document names things.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    pub authorization: String,
    pub token: String,
    /// None when identity comes only from the ID token (Apple).
    pub userinfo: Option<String>,
    pub scope: String,
    pub account_id_field: String,
    pub email_field: String,
    pub email_verified_field: String,
}

struct Named {
    authorization: &'static str,
    token: &'static str,
    userinfo: Option<&'static str>,
    scope: &'static str,
    account_id_field: &'static str,
}

fn named(kind: &str) -> Option<Named> {
    let n = |authorization, token, userinfo, scope, account_id_field| Named {
        authorization,
        token,
        userinfo,
        scope,
        account_id_field,
    };
    Some(match kind {
        "google" => n(
            "https://accounts.google.com/o/oauth2/v2/auth",
            "https://oauth2.googleapis.com/token",
            Some("https://openidconnect.googleapis.com/v1/userinfo"),
            "openid email profile",
            "sub",
        ),
        "github" => n(
            "https://github.com/login/oauth/authorize",
            "https://github.com/login/oauth/access_token",
            Some("https://api.github.com/user"),
            "user:email",
            "id",
        ),
        "microsoft" => n(
            "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
            "https://login.microsoftonline.com/common/oauth2/v2.0/token",
            Some("https://graph.microsoft.com/oidc/userinfo"),
            "openid email profile offline_access",
            "sub",
        ),
        "spotify" => n(
            "https://accounts.spotify.com/authorize",
            "https://accounts.spotify.com/api/token",
            Some("https://api.spotify.com/v1/me"),
            "user-read-email user-read-private",
            "id",
        ),
        "facebook" => n(
            "https://www.facebook.com/v19.0/dialog/oauth",
            "https://graph.facebook.com/v19.0/oauth/access_token",
            Some("https://graph.facebook.com/me?fields=id,name,email,picture"),
            "email public_profile",
            "id",
        ),
        "discord" => n(
            "https://discord.com/oauth2/authorize",
            "https://discord.com/api/oauth2/token",
            Some("https://discord.com/api/users/@me"),
            "identify email",
            "id",
        ),
        "gitlab" => n(
            "https://gitlab.com/oauth/authorize",
            "https://gitlab.com/oauth/token",
            Some("https://gitlab.com/oauth/userinfo"),
            "openid email profile",
            "sub",
        ),
        "bitbucket" => n(
            "https://bitbucket.org/site/oauth2/authorize",
            "https://bitbucket.org/site/oauth2/access_token",
            Some("https://api.bitbucket.org/2.0/user"),
            "account email",
            "uuid",
        ),
        "linkedin" => n(
            "https://www.linkedin.com/oauth/v2/authorization",
            "https://www.linkedin.com/oauth/v2/accessToken",
            Some("https://api.linkedin.com/v2/userinfo"),
            "openid profile email",
            "sub",
        ),
        "apple" => n(
            "https://appleid.apple.com/auth/authorize",
            "https://appleid.apple.com/auth/token",
            None,
            "name email",
            "sub",
        ),
        "x" => n(
            "https://twitter.com/i/oauth2/authorize",
            "https://api.twitter.com/2/oauth2/token",
            Some("https://api.twitter.com/2/users/me"),
            "users.read tweet.read offline.access",
            "data.id",
        ),
        "twitch" => n(
            "https://id.twitch.tv/oauth2/authorize",
            "https://id.twitch.tv/oauth2/token",
            Some("https://id.twitch.tv/oauth2/userinfo"),
            "openid user:read:email",
            "sub",
        ),
        _ => return None,
    })
}

fn unavailable(why: impl std::fmt::Display) -> Error {
    tracing::warn!(error = %why, "OAuth provider call failed");
    coded(
        ErrorCode::OauthProviderTemporarilyUnavailable,
        "The OAuth provider could not be reached; try again later.",
    )
}

fn denied(why: impl std::fmt::Display) -> Error {
    tracing::info!(reason = %why, "OAuth provider refused");
    coded(
        ErrorCode::OauthProviderAccessDenied,
        "The OAuth provider refused the sign-in.",
    )
}

/// Discovery documents, kept for a while: they change rarely and are read twice per flow.
#[derive(Default)]
pub struct Discovery {
    cache: Mutex<HashMap<String, (Instant, Value)>>,
}

const DISCOVERY_TTL: Duration = Duration::from_secs(300);

impl Discovery {
    async fn document(&self, http: &reqwest::Client, issuer: &str) -> Result<Value> {
        if let Ok(cache) = self.cache.lock() {
            if let Some((at, doc)) = cache.get(issuer) {
                if at.elapsed() < DISCOVERY_TTL {
                    return Ok(doc.clone());
                }
            }
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let res = http.get(&url).send().await.map_err(unavailable)?;
        if !res.status().is_success() {
            return Err(unavailable(format!("discovery answered {}", res.status())));
        }
        let doc: Value = res.json().await.map_err(unavailable)?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(issuer.to_owned(), (Instant::now(), doc.clone()));
        }
        Ok(doc)
    }
}

/// The endpoints of a configured provider: explicit settings first, then discovery (`oidc`),
/// then the named type's defaults.
pub async fn endpoints(
    p: &OAuthProvider,
    http: &reqwest::Client,
    discovery: &Discovery,
) -> Result<Endpoints> {
    let doc = match (&p.issuer, p.provider_type.as_str()) {
        (Some(issuer), "oidc") => Some(discovery.document(http, issuer).await?),
        _ => None,
    };
    let defaults = named(&p.provider_type);
    let pick = |set: &Option<String>, discovered: &str, fallback: Option<&str>| {
        set.clone()
            .or_else(|| {
                doc.as_ref()
                    .and_then(|d| d[discovered].as_str().map(str::to_owned))
            })
            .or_else(|| fallback.map(str::to_owned))
    };
    let missing = || unavailable(format!("provider {} has no endpoints", p.id));
    let authorization = pick(
        &p.authorization_endpoint,
        "authorization_endpoint",
        defaults.as_ref().map(|n| n.authorization),
    )
    .ok_or_else(missing)?;
    let token = pick(
        &p.token_endpoint,
        "token_endpoint",
        defaults.as_ref().map(|n| n.token),
    )
    .ok_or_else(missing)?;
    let userinfo = pick(
        &p.userinfo_endpoint,
        "userinfo_endpoint",
        defaults.as_ref().and_then(|n| n.userinfo),
    );
    let default_scope = match p.provider_type.as_str() {
        "oidc" => "openid email profile",
        "oauth2" => "",
        _ => defaults.as_ref().map_or("", |n| n.scope),
    };
    Ok(Endpoints {
        authorization,
        token,
        userinfo,
        scope: p.scope.clone().unwrap_or_else(|| default_scope.to_owned()),
        account_id_field: p.account_id_field.clone().unwrap_or_else(|| {
            defaults
                .as_ref()
                .map_or("sub", |n| n.account_id_field)
                .to_owned()
        }),
        email_field: p.email_field.clone().unwrap_or_else(|| "email".into()),
        email_verified_field: p
            .email_verified_field
            .clone()
            .unwrap_or_else(|| "email_verified".into()),
    })
}

/// The provider URL the browser is sent to. PKCE toward the provider too: some require it and
/// the others ignore it.
pub fn authorization_url(
    e: &Endpoints,
    client_id: &str,
    callback: &str,
    state: &str,
    challenge: &str,
    extra_scope: Option<&str>,
) -> Result<String> {
    let mut url = url::Url::parse(&e.authorization).map_err(unavailable)?;
    let scope = [e.scope.as_str(), extra_scope.unwrap_or_default()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    url.query_pairs_mut()
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", callback)
        .append_pair("response_type", "code")
        .append_pair("scope", &scope)
        .append_pair("state", state)
        .append_pair("code_challenge", challenge)
        .append_pair("code_challenge_method", "S256");
    Ok(url.into())
}

/// What the token endpoint granted.
#[derive(Debug, Clone, Default)]
pub struct Grant {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in_secs: Option<i64>,
    pub scope: Option<String>,
    pub id_token: Option<String>,
}

fn grant_of(body: &Value) -> Result<Grant> {
    let access_token = body["access_token"]
        .as_str()
        .ok_or_else(|| denied("no access_token in the token answer"))?;
    Ok(Grant {
        access_token: access_token.to_owned(),
        refresh_token: body["refresh_token"].as_str().map(str::to_owned),
        expires_in_secs: body["expires_in"].as_i64(),
        scope: body["scope"].as_str().map(str::to_owned),
        id_token: body["id_token"].as_str().map(str::to_owned),
    })
}

/// Calls the token endpoint with a form; a 4xx is a refusal, anything else an outage.
async fn token_call(http: &reqwest::Client, url: &str, form: &[(&str, &str)]) -> Result<Grant> {
    let res = http
        .post(url)
        .header("accept", "application/json")
        .form(form)
        .send()
        .await
        .map_err(unavailable)?;
    let status = res.status();
    if status.is_client_error() {
        return Err(denied(format!("token endpoint answered {status}")));
    }
    if !status.is_success() {
        return Err(unavailable(format!("token endpoint answered {status}")));
    }
    let body: Value = res.json().await.map_err(unavailable)?;
    if body.get("error").is_some() {
        return Err(denied(format!("token endpoint error {}", body["error"])));
    }
    grant_of(&body)
}

pub struct Client<'a> {
    pub id: &'a str,
    pub secret: &'a str,
}

/// Exchanges the provider's authorization code.
pub async fn exchange(
    http: &reqwest::Client,
    e: &Endpoints,
    client: &Client<'_>,
    code: &str,
    callback: &str,
    verifier: &str,
) -> Result<Grant> {
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", callback),
        ("client_id", client.id),
        ("client_secret", client.secret),
        ("code_verifier", verifier),
    ];
    token_call(http, &e.token, &form).await
}

/// A fresh access token from a stored provider refresh token (connected accounts).
pub async fn refresh(
    http: &reqwest::Client,
    e: &Endpoints,
    client: &Client<'_>,
    refresh_token: &str,
    scope: Option<&str>,
) -> Result<Grant> {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", client.id),
        ("client_secret", client.secret),
    ];
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    token_call(http, &e.token, &form).await
}

/// Who signed in at the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub account_id: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub display_name: Option<String>,
    pub profile_image_url: Option<String>,
}

/// A field by dotted path (`data.id`), numbers read as text.
fn field(doc: &Value, path: &str) -> Option<String> {
    let mut v = doc;
    for part in path.split('.') {
        v = v.get(part)?;
    }
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The claims of an ID token the token endpoint just returned. The signature is not checked:
/// the token came straight from the provider over TLS in answer to our authenticated request,
/// which OpenID Connect Core (3.1.3.7) accepts in place of it.
fn id_token_claims(token: &str) -> Option<Value> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Reads the account behind `grant`: ID token claims, overlaid with the userinfo answer.
pub async fn identity(http: &reqwest::Client, e: &Endpoints, grant: &Grant) -> Result<Identity> {
    let mut doc = grant
        .id_token
        .as_deref()
        .and_then(id_token_claims)
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(url) = &e.userinfo {
        let res = http
            .get(url)
            .bearer_auth(&grant.access_token)
            .header("accept", "application/json")
            .header("user-agent", "latchkey")
            .send()
            .await
            .map_err(unavailable)?;
        if res.status().is_client_error() {
            return Err(denied(format!("userinfo answered {}", res.status())));
        }
        if !res.status().is_success() {
            return Err(unavailable(format!("userinfo answered {}", res.status())));
        }
        let info: Value = res.json().await.map_err(unavailable)?;
        if let (Value::Object(into), Value::Object(from)) = (&mut doc, info) {
            into.extend(from);
        }
    }
    let account_id = field(&doc, &e.account_id_field).ok_or_else(|| {
        denied(format!(
            "no {} in the provider's answer",
            e.account_id_field
        ))
    })?;
    let verified = doc
        .get(&e.email_verified_field)
        .is_some_and(|v| v == &Value::Bool(true) || v == "true");
    let email = field(&doc, &e.email_field).map(|m| latchkey_shared::email::normalize(&m));
    Ok(Identity {
        account_id,
        email_verified: verified && email.is_some(),
        email,
        display_name: ["name", "display_name", "login", "username"]
            .iter()
            .find_map(|k| field(&doc, k)),
        profile_image_url: ["picture", "avatar_url"]
            .iter()
            .find_map(|k| field(&doc, k)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_dotted_fields_and_numbers() {
        let doc = json!({ "data": { "id": 42 }, "sub": "abc", "empty": "" });
        assert_eq!(field(&doc, "data.id").as_deref(), Some("42"));
        assert_eq!(field(&doc, "sub").as_deref(), Some("abc"));
        assert_eq!(field(&doc, "empty"), None);
        assert_eq!(field(&doc, "data.missing"), None);
    }

    #[test]
    fn reads_id_token_claims() {
        use base64::Engine;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(json!({ "sub": "s1", "email": "A@Example.com" }).to_string());
        let claims = id_token_claims(&format!("h.{payload}.sig")).unwrap_or_default();
        assert_eq!(claims["sub"], "s1");
        assert!(id_token_claims("garbage").is_none());
    }
}
