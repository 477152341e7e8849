//! The service as OAuth authorization server toward the app (10 §4): authorize sends the
//! browser to the provider, the callback turns the provider's answer into a user and an
//! authorization code, and the token endpoint trades that code (with PKCE) for a session.
//!
//! Flow state lives in the code table: the inner state is `<project id><45-char code>` of kind
//! `OAUTH_FLOW` (10 minutes); authorization codes are kind `OAUTH_AUTHORIZATION_CODE` (5 minutes).

use base64::Engine;
use latchkey_shared::codes::CodeError;
use latchkey_shared::crypto::{constant_time_eq, hash_secret, random_base32};
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::linking;
use super::provider::{self, Client};
use crate::app::App;
use crate::domain::keys::{self, Access};
use crate::domain::mail::require_trusted;
use crate::domain::mfa::{self, SignedIn};
use crate::domain::sessions;
use crate::domain::settings::{OAuthProvider, Settings};
use crate::error::{coded, Error, Result};
use crate::store::KeyKind;

const FLOW_KIND: &str = "OAUTH_FLOW";
const FLOW_TTL_MILLIS: i64 = 10 * 60 * 1000;
const CODE_KIND: &str = "OAUTH_AUTHORIZATION_CODE";
const CODE_TTL_MILLIS: i64 = 5 * 60 * 1000;
/// Native apps receive the code on this scheme (50 §7).
const MOBILE_SCHEME: &str = "stack-auth-mobile-oauth-url:";

/// What `authorize` was asked, kept until the callback.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Flow {
    provider_id: String,
    redirect_uri: String,
    state: String,
    code_challenge: String,
    code_challenge_method: String,
    link_user: Option<Uuid>,
    /// The signed-in user of a sign-in flow: if anonymous, a new account upgrades it.
    #[serde(default)]
    upgrade_user: Option<Uuid>,
    error_redirect_uri: Option<String>,
    after_callback_redirect_url: Option<String>,
    redirect_mode: bool,
    provider_verifier: String,
    client_key_hash: String,
    extra_scope: Option<String>,
}

/// An authorization code's meaning, kept until the token call.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Granted {
    user_id: Uuid,
    is_new_user: bool,
    redirect_uri: String,
    code_challenge: String,
    code_challenge_method: String,
    after_callback_redirect_url: Option<String>,
}

pub struct AuthorizeRequest {
    pub provider_id: String,
    pub client_secret: String,
    pub redirect_uri: String,
    pub state: String,
    pub code_challenge: String,
    pub code_challenge_method: String,
    pub link: bool,
    /// The user of the access token given, if any.
    pub user_id: Option<Uuid>,
    pub provider_scope: Option<String>,
    pub error_redirect_uri: Option<String>,
    pub after_callback_redirect_url: Option<String>,
    pub redirect_mode: bool,
}

pub struct Authorized {
    pub location: String,
    pub inner_state: String,
}

fn not_enabled() -> Error {
    coded(
        ErrorCode::OauthProviderNotFoundOrNotEnabled,
        "This OAuth provider is not configured for the project.",
    )
}

fn provider<'a>(settings: &'a Settings, id: &str) -> Result<&'a OAuthProvider> {
    settings
        .oauth_providers
        .iter()
        .find(|p| p.id == id)
        .ok_or_else(not_enabled)
}

/// The project's own client credentials at the provider. Shared (service-owned) keys are a
/// development convenience this deployment does not have, so a provider without its own
/// credentials cannot be used.
pub fn client(p: &OAuthProvider) -> Result<Client<'_>> {
    match (&p.client_id, &p.client_secret) {
        (Some(id), Some(secret)) => Ok(Client { id, secret }),
        _ => Err(not_enabled()),
    }
}

fn callback_url(app: &App, provider_id: &str) -> String {
    format!(
        "{}/api/v1/auth/oauth/callback/{provider_id}",
        app.public_url.trim_end_matches('/')
    )
}

fn s256(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

async fn check_client(app: &App, project: Uuid, key_hash: &str) -> Result<Access> {
    keys::check_hash(
        &*app.projects,
        project,
        KeyKind::Client,
        key_hash,
        app.now(),
    )
    .await
}

/// `GET /auth/oauth/authorize/{provider_id}` (10 §4.1).
pub async fn authorize(app: &App, ctx: &Context, req: AuthorizeRequest) -> Result<Authorized> {
    let key_hash = hash_secret(&req.client_secret);
    match check_client(app, ctx.project_id, &key_hash).await? {
        Access::Granted => {}
        Access::ProjectNotFound => {
            return Err(coded(
                ErrorCode::InvalidOauthClientIdOrSecret,
                "No project has this client id.",
            ))
        }
        Access::KeyInvalid => {
            return Err(coded(
                ErrorCode::InvalidPublishableClientKey,
                "The publishable client key is not valid for this project.",
            ))
        }
    }
    let (_, settings) = app.project(ctx.project_id).await?;
    let p = provider(&settings, &req.provider_id)?;
    if req.link && req.user_id.is_none() {
        return Err(Error::BadRequest(
            "type=link needs the user's access token".into(),
        ));
    }
    if !req.link && !p.allow_sign_in {
        return Err(not_enabled());
    }
    if let Some(url) = &req.after_callback_redirect_url {
        require_trusted(url, &settings)?;
    }
    if p.shared && req.provider_scope.is_some() {
        return Err(coded(
            ErrorCode::OauthExtraScopeNotAvailableWithSharedOauthKeys,
            "Extra provider scopes need the project's own OAuth keys.",
        ));
    }
    let client = client(p)?;
    let endpoints = provider::endpoints(p, &app.http, &app.discovery).await?;
    let provider_verifier = random_base32(64);
    let mut redirect_uri = req.redirect_uri.clone();
    if let Some(at) = redirect_uri.find('#') {
        redirect_uri.truncate(at);
    }
    let flow = Flow {
        provider_id: p.id.clone(),
        redirect_uri,
        state: req.state,
        code_challenge: req.code_challenge,
        code_challenge_method: req.code_challenge_method,
        link_user: req.user_id.filter(|_| req.link),
        upgrade_user: req.user_id.filter(|_| !req.link),
        error_redirect_uri: req.error_redirect_uri,
        after_callback_redirect_url: req.after_callback_redirect_url,
        redirect_mode: req.redirect_mode,
        provider_verifier: provider_verifier.clone(),
        client_key_hash: key_hash,
        extra_scope: req.provider_scope.clone(),
    };
    let data = serde_json::to_value(&flow).map_err(|e| Error::Invalid(e.to_string()))?;
    let code = app
        .codes
        .create(ctx.project_id, FLOW_KIND, &data, FLOW_TTL_MILLIS)
        .await?;
    let inner_state = format!("{}{code}", ctx.project_id.simple());
    let location = provider::authorization_url(
        &endpoints,
        client.id,
        &callback_url(app, &p.id),
        &inner_state,
        &s256(&provider_verifier),
        req.provider_scope.as_deref(),
    )?;
    Ok(Authorized {
        location,
        inner_state,
    })
}

pub struct CallbackRequest {
    pub provider_id: String,
    /// The 45-character code part of the inner state (the project part became the context).
    pub state_code: String,
    pub code: Option<String>,
    pub error: Option<String>,
    pub cookie_present: bool,
}

fn invalid_state() -> Error {
    coded(
        ErrorCode::InvalidOauthState,
        "The OAuth state is not valid.",
    )
}

/// `GET|POST /auth/oauth/callback/{provider_id}` (10 §4.2): the app URL to redirect to, with
/// the authorization code or, when that URL is trusted, with the error.
pub async fn callback(app: &App, ctx: &Context, req: CallbackRequest) -> Result<String> {
    let found = match app
        .codes
        .check(ctx.project_id, FLOW_KIND, &req.state_code)
        .await
    {
        Ok(found) => found,
        Err(CodeError::Expired) => {
            return Err(coded(
                ErrorCode::OuterOauthTimeout,
                "The sign-in took longer than 10 minutes; start again.",
            ))
        }
        Err(CodeError::Db(e)) => return Err(CodeError::Db(e).into()),
        Err(_) => return Err(invalid_state()),
    };
    let flow: Flow = serde_json::from_value(found.data.clone()).map_err(|_| invalid_state())?;
    // A link, and an anonymous user's upgrade, attach the provider account before any PKCE
    // check, so they always need the browser that started them (else a victim could be made
    // to attach their account to someone else's user).
    let needs_cookie =
        flow.redirect_mode || flow.link_user.is_some() || flow.upgrade_user.is_some();
    if (needs_cookie && !req.cookie_present) || flow.provider_id != req.provider_id {
        return Err(invalid_state());
    }
    app.codes
        .consume(ctx.project_id, &found)
        .await
        .map_err(|_| invalid_state())?;
    let (_, settings) = app.project(ctx.project_id).await?;
    match complete(app, ctx, &settings, &flow, &req).await {
        Ok(location) => Ok(location),
        Err(Error::Coded(e)) => match error_target(&flow, &settings) {
            Some(target) => Ok(with_error(target, &e)),
            None => Err(Error::Coded(e)),
        },
        Err(other) => Err(other),
    }
}

fn trusted_redirect(url: &str, settings: &Settings) -> bool {
    url.starts_with(MOBILE_SCHEME) || require_trusted(url, settings).is_ok()
}

/// Where a coded error after the state check goes (10 §4.2 step 8).
fn error_target<'a>(flow: &'a Flow, settings: &Settings) -> Option<&'a str> {
    std::iter::once(Some(&flow.redirect_uri))
        .chain(std::iter::once(flow.error_redirect_uri.as_ref()))
        .flatten()
        .find(|u| trusted_redirect(u, settings))
        .map(String::as_str)
}

fn with_query(target: &str, pairs: &[(&str, &str)]) -> String {
    match url::Url::parse(target) {
        Ok(mut url) => {
            url.set_fragment(None);
            url.query_pairs_mut().extend_pairs(pairs);
            url.into()
        }
        Err(_) => target.to_owned(),
    }
}

fn with_error(target: &str, e: &latchkey_shared::error::CodedError) -> String {
    let details = e
        .details
        .as_ref()
        .map(|d| d.to_string())
        .unwrap_or_else(|| "{}".into());
    with_query(
        target,
        &[
            ("error", "server_error"),
            ("error_description", &e.message),
            ("errorCode", e.code.wire()),
            ("message", &e.message),
            ("details", &details),
        ],
    )
}

async fn complete(
    app: &App,
    ctx: &Context,
    settings: &Settings,
    flow: &Flow,
    req: &CallbackRequest,
) -> Result<String> {
    let p = provider(settings, &flow.provider_id)?;
    if check_client(app, ctx.project_id, &flow.client_key_hash).await? != Access::Granted {
        return Err(coded(
            ErrorCode::InvalidPublishableClientKey,
            "The publishable client key is no longer valid.",
        ));
    }
    if !trusted_redirect(&flow.redirect_uri, settings) {
        return Err(coded(
            ErrorCode::RedirectUrlNotWhitelisted,
            "The redirect URI is not trusted by the project.",
        ));
    }
    let code = match (&req.error, &req.code) {
        (None, Some(code)) => code,
        _ => {
            return Err(coded(
                ErrorCode::OauthProviderAccessDenied,
                "The OAuth provider refused the sign-in.",
            ))
        }
    };
    let client = client(p)?;
    let endpoints = provider::endpoints(p, &app.http, &app.discovery).await?;
    let callback = callback_url(app, &p.id);
    let grant = provider::exchange(
        &app.http,
        &endpoints,
        &client,
        code,
        &callback,
        &flow.provider_verifier,
    )
    .await?;
    let identity = provider::identity(&app.http, &endpoints, &grant).await?;
    let scopes = grant.scope.clone().unwrap_or_else(|| {
        [
            endpoints.scope.as_str(),
            flow.extra_scope.as_deref().unwrap_or_default(),
        ]
        .join(" ")
    });
    let tokens = linking::ProviderTokens::from_grant(&grant, &scopes, app.now());
    let (user_id, is_new_user) = match flow.link_user {
        Some(user) => (
            linking::link(app, ctx, p, &identity, tokens, user).await?,
            false,
        ),
        None => {
            linking::authenticate(app, ctx, settings, p, &identity, tokens, flow.upgrade_user)
                .await?
        }
    };
    let granted = Granted {
        user_id,
        is_new_user,
        redirect_uri: flow.redirect_uri.clone(),
        code_challenge: flow.code_challenge.clone(),
        code_challenge_method: flow.code_challenge_method.clone(),
        after_callback_redirect_url: flow.after_callback_redirect_url.clone(),
    };
    let data = serde_json::to_value(&granted).map_err(|e| Error::Invalid(e.to_string()))?;
    let authorization_code = app
        .codes
        .create(ctx.project_id, CODE_KIND, &data, CODE_TTL_MILLIS)
        .await?;
    Ok(with_query(
        &flow.redirect_uri,
        &[("code", &authorization_code), ("state", &flow.state)],
    ))
}

pub enum TokenGrant {
    AuthorizationCode {
        code: String,
        redirect_uri: String,
        code_verifier: String,
    },
    RefreshToken(String),
}

pub struct Issued {
    pub access_token: String,
    pub refresh_token: String,
    /// Set for the authorization-code grant.
    pub is_new_user: Option<bool>,
    pub after_callback_redirect_url: Option<String>,
}

fn invalid_code() -> Error {
    coded(
        ErrorCode::InvalidAuthorizationCode,
        "The authorization code is not valid.",
    )
}

/// `POST /auth/oauth/token` (10 §4.3).
pub async fn token(
    app: &App,
    ctx: &Context,
    client_secret: &str,
    grant: TokenGrant,
) -> Result<Issued> {
    if check_client(app, ctx.project_id, &hash_secret(client_secret)).await? != Access::Granted {
        return Err(coded(
            ErrorCode::InvalidOauthClientIdOrSecret,
            "The client id or secret is not valid.",
        ));
    }
    match grant {
        TokenGrant::RefreshToken(token) => {
            let (access_token, rotated) = sessions::refresh(app, ctx, &token).await?;
            Ok(Issued {
                access_token,
                refresh_token: rotated.unwrap_or(token),
                is_new_user: None,
                after_callback_redirect_url: None,
            })
        }
        TokenGrant::AuthorizationCode {
            code,
            redirect_uri,
            code_verifier,
        } => {
            let found = match app.codes.check(ctx.project_id, CODE_KIND, &code).await {
                Ok(found) => found,
                Err(CodeError::Db(e)) => return Err(CodeError::Db(e).into()),
                Err(_) => return Err(invalid_code()),
            };
            let granted: Granted =
                serde_json::from_value(found.data.clone()).map_err(|_| invalid_code())?;
            if granted.redirect_uri != redirect_uri.split('#').next().unwrap_or_default() {
                return Err(coded(
                    ErrorCode::RedirectUriMismatch,
                    "redirect_uri differs from the one given at authorize.",
                ));
            }
            let expected = match granted.code_challenge_method.as_str() {
                "S256" => s256(&code_verifier),
                _ => code_verifier.clone(),
            };
            if !constant_time_eq(&expected, &granted.code_challenge) {
                return Err(coded(
                    ErrorCode::OauthInvalidRequest,
                    "The PKCE code verifier does not match the challenge.",
                ));
            }
            app.codes
                .consume(ctx.project_id, &found)
                .await
                .map_err(|_| invalid_code())?;
            let SignedIn { tokens, .. } =
                mfa::sign_in(app, ctx, granted.user_id, granted.is_new_user).await?;
            Ok(Issued {
                access_token: tokens.access_token,
                refresh_token: tokens.refresh_token,
                is_new_user: Some(granted.is_new_user),
                after_callback_redirect_url: granted.after_callback_redirect_url,
            })
        }
    }
}
