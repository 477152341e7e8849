//! A user's provider records (10 §5) and connected accounts (10 §6).

use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::flow::client;
use super::provider;
use crate::app::App;
use crate::domain::settings::{OAuthProvider, Settings};
use crate::domain::user_write::LinkedAccount;
use crate::domain::users;
use crate::error::{coded, Error, Result};
use crate::store::oauth::OAuthAccount;
use crate::store::StoreError;

/// The server shape of a record; the gateway drops `account_id` for clients.
pub fn view(r: &OAuthAccount) -> Value {
    let mut v = json!({
        "id": r.id,
        "user_id": r.user_id,
        "provider_config_id": r.provider_id,
        "type": r.provider_type,
        "allow_sign_in": r.allow_sign_in,
        "allow_connected_accounts": r.allow_connected_accounts,
        "account_id": r.account_id,
    });
    if let Some(email) = &r.email {
        v["email"] = json!(email);
    }
    v
}

fn not_found(id: Uuid) -> Error {
    coded(
        ErrorCode::OauthProviderRecordNotFound,
        format!("No OAuth provider record with id {id} exists for this user."),
    )
}

fn configured<'a>(settings: &'a Settings, id: &str) -> Result<&'a OAuthProvider> {
    settings
        .oauth_providers
        .iter()
        .find(|p| p.id == id)
        .ok_or_else(|| {
            coded(
                ErrorCode::OauthProviderNotFoundOrNotEnabled,
                format!("OAuth provider {id} is not configured for the project."),
            )
        })
}

async fn require_user(app: &App, ctx: &Context, user_id: Uuid) -> Result<()> {
    app.accounts
        .user(ctx.project_id, user_id)
        .await?
        .map(drop)
        .ok_or_else(|| users::not_found(user_id))
}

/// `GET /oauth-providers`: one user's records, or (servers, no user) every record.
pub async fn list(app: &App, ctx: &Context, user_id: Option<Uuid>) -> Result<Vec<Value>> {
    let records = match user_id {
        Some(user) => {
            require_user(app, ctx, user).await?;
            app.oauth.of_user(ctx.project_id, user).await?
        }
        None => app.oauth.of_project(ctx.project_id).await?,
    };
    Ok(records.iter().map(view).collect())
}

async fn record_of(app: &App, ctx: &Context, user_id: Uuid, id: Uuid) -> Result<OAuthAccount> {
    require_user(app, ctx, user_id).await?;
    app.oauth
        .get(ctx.project_id, id)
        .await?
        .filter(|r| r.user_id == user_id)
        .ok_or_else(|| not_found(id))
}

pub async fn get(app: &App, ctx: &Context, user_id: Uuid, id: Uuid) -> Result<Value> {
    Ok(view(&record_of(app, ctx, user_id, id).await?))
}

/// The sign-in rules of 10 §5 for a record about to be written.
async fn check_unique(app: &App, ctx: &Context, r: &OAuthAccount) -> Result<()> {
    let own = app.oauth.of_user(ctx.project_id, r.user_id).await?;
    let same_provider = own
        .iter()
        .filter(|o| o.id != r.id && o.provider_id == r.provider_id);
    for other in same_provider {
        if other.account_id == r.account_id {
            return Err(Error::BadRequest(
                "the user already has a record of this provider account".into(),
            ));
        }
        if r.allow_sign_in && other.allow_sign_in {
            return Err(Error::BadRequest(
                "the user already signs in with another account of this provider".into(),
            ));
        }
    }
    if r.allow_sign_in {
        let holders = app
            .oauth
            .of_account(ctx.project_id, &r.provider_id, &r.account_id)
            .await?;
        if holders.iter().any(|h| h.id != r.id && h.allow_sign_in) {
            return Err(coded(
                ErrorCode::OauthProviderAccountIdAlreadyUsedForSignIn,
                "Another user already signs in with this provider account.",
            ));
        }
    }
    Ok(())
}

async fn insert(app: &App, ctx: &Context, record: &OAuthAccount) -> Result<()> {
    check_unique(app, ctx, record).await?;
    app.oauth.insert(record).await.map_err(|e| match e {
        StoreError::Conflict => {
            Error::BadRequest("the user already has a record of this provider account".into())
        }
        other => other.into(),
    })
}

fn text(body: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(Error::Invalid(format!("{key} must be a non-empty string"))),
    }
}

fn flag(body: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(Error::Invalid(format!("{key} must be a boolean"))),
    }
}

fn object<'a>(body: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>> {
    let map = body
        .as_object()
        .ok_or_else(|| Error::Invalid("the body must be a JSON object".into()))?;
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::Invalid(format!("unknown property: {unknown}")));
    }
    Ok(map)
}

/// `POST /oauth-providers` (servers): a record made by hand, without provider tokens.
pub async fn create(app: &App, ctx: &Context, user_id: Uuid, body: &Value) -> Result<Value> {
    let allowed = [
        "user_id",
        "provider_config_id",
        "account_id",
        "allow_sign_in",
        "allow_connected_accounts",
        "email",
    ];
    let map = object(body, &allowed)?;
    let required = |v: Option<String>, key: &str| {
        v.ok_or_else(|| Error::Invalid(format!("{key} is required")))
    };
    let provider_id = required(text(map, "provider_config_id")?, "provider_config_id")?;
    let account_id = required(text(map, "account_id")?, "account_id")?;
    let flag_required =
        |key: &str| flag(map, key)?.ok_or_else(|| Error::Invalid(format!("{key} is required")));
    let allow_sign_in = flag_required("allow_sign_in")?;
    let allow_connected_accounts = flag_required("allow_connected_accounts")?;
    let email = text(map, "email")?.map(|e| latchkey_shared::email::normalize(&e));
    require_user(app, ctx, user_id).await?;
    let (_, settings) = app.project(ctx.project_id).await?;
    let p = configured(&settings, &provider_id)?;
    let record = OAuthAccount {
        project_id: ctx.project_id,
        id: Uuid::now_v7(),
        user_id,
        provider_id: p.id.clone(),
        provider_type: p.provider_type.clone(),
        account_id,
        email,
        allow_sign_in,
        allow_connected_accounts,
        access_token: None,
        refresh_token: None,
        access_token_expires_at_millis: None,
        scopes: String::new(),
        created_at_millis: app.now(),
    };
    insert(app, ctx, &record).await?;
    Ok(view(&record))
}

/// An `oauth_providers` entry of `POST /users`.
pub async fn link_on_create(
    app: &App,
    ctx: &Context,
    settings: &Settings,
    user_id: Uuid,
    linked: &LinkedAccount,
) -> Result<()> {
    let p = configured(settings, &linked.id)?;
    let record = OAuthAccount {
        project_id: ctx.project_id,
        id: Uuid::now_v7(),
        user_id,
        provider_id: p.id.clone(),
        provider_type: p.provider_type.clone(),
        account_id: linked.account_id.clone(),
        email: linked.email.clone(),
        allow_sign_in: true,
        allow_connected_accounts: true,
        access_token: None,
        refresh_token: None,
        access_token_expires_at_millis: None,
        scopes: String::new(),
        created_at_millis: app.now(),
    };
    insert(app, ctx, &record).await
}

/// `PATCH /oauth-providers/{user_id}/{id}`: clients change the two flags, servers also the
/// e-mail and account id.
pub async fn update(
    app: &App,
    ctx: &Context,
    user_id: Uuid,
    id: Uuid,
    body: &Value,
) -> Result<Value> {
    let allowed: &[&str] = if ctx.access_type == AccessType::Client {
        &["allow_sign_in", "allow_connected_accounts"]
    } else {
        &[
            "allow_sign_in",
            "allow_connected_accounts",
            "email",
            "account_id",
        ]
    };
    let map = object(body, allowed)?;
    let mut record = record_of(app, ctx, user_id, id).await?;
    if let Some(v) = flag(map, "allow_sign_in")? {
        record.allow_sign_in = v;
    }
    if let Some(v) = flag(map, "allow_connected_accounts")? {
        record.allow_connected_accounts = v;
    }
    if let Some(v) = text(map, "email")? {
        record.email = Some(latchkey_shared::email::normalize(&v));
    }
    if let Some(v) = text(map, "account_id")? {
        record.account_id = v;
    }
    check_unique(app, ctx, &record).await?;
    app.oauth.update(&record).await?;
    Ok(view(&record))
}

pub async fn delete(app: &App, ctx: &Context, user_id: Uuid, id: Uuid) -> Result<()> {
    let record = record_of(app, ctx, user_id, id).await?;
    app.oauth.delete(ctx.project_id, record.id).await?;
    Ok(())
}

/// `GET /connected-accounts/{user_id}`.
pub async fn connected(app: &App, ctx: &Context, user_id: Uuid) -> Result<Vec<Value>> {
    require_user(app, ctx, user_id).await?;
    let records = app.oauth.of_user(ctx.project_id, user_id).await?;
    Ok(records
        .iter()
        .filter(|r| r.allow_connected_accounts)
        .map(|r| json!({ "user_id": r.user_id, "provider": r.provider_id, "provider_account_id": r.account_id }))
        .collect())
}

/// Provider tokens stay usable until a minute before they expire.
const EXPIRY_MARGIN_MILLIS: i64 = 60_000;

fn has_scopes(granted: &str, wanted: Option<&str>) -> bool {
    let granted: Vec<&str> = granted
        .split([' ', ','])
        .filter(|s| !s.is_empty())
        .collect();
    wanted
        .unwrap_or_default()
        .split(' ')
        .filter(|s| !s.is_empty())
        .all(|w| granted.contains(&w))
}

/// `POST /connected-accounts/{user_id}/{provider_id}/access-token`: a live provider access
/// token, refreshed with the stored refresh token when needed.
pub async fn access_token(
    app: &App,
    ctx: &Context,
    user_id: Uuid,
    provider_id: &str,
    scope: Option<&str>,
) -> Result<String> {
    let (_, settings) = app.project(ctx.project_id).await?;
    let p = configured(&settings, provider_id)?;
    if p.shared {
        return Err(coded(
            ErrorCode::OauthAccessTokenNotAvailableWithSharedOauthKeys,
            "Connected accounts need the project's own OAuth keys.",
        ));
    }
    require_user(app, ctx, user_id).await?;
    let records = app.oauth.of_user(ctx.project_id, user_id).await?;
    let mut record = records
        .into_iter()
        .find(|r| r.provider_id == p.id && r.allow_connected_accounts)
        .ok_or_else(|| {
            coded(
                ErrorCode::OauthConnectionNotConnectedToUser,
                "The user has no connected account with this provider.",
            )
        })?;
    if !has_scopes(&record.scopes, scope) {
        return Err(coded(
            ErrorCode::OauthConnectionDoesNotHaveRequiredScope,
            "The connected account was not granted the requested scope.",
        ));
    }
    let live = record
        .access_token_expires_at_millis
        .is_none_or(|at| at > app.now() + EXPIRY_MARGIN_MILLIS);
    if let (Some(token), true) = (&record.access_token, live) {
        return Ok(token.clone());
    }
    let unavailable = || {
        coded(
            ErrorCode::OauthAccessTokenNotAvailable,
            "No valid access token is available for this connected account.",
        )
    };
    let refresh_token = record.refresh_token.clone().ok_or_else(unavailable)?;
    let endpoints = provider::endpoints(p, &app.http, &app.discovery).await?;
    let grant = provider::refresh(&app.http, &endpoints, &client(p)?, &refresh_token, scope)
        .await
        .map_err(|_| unavailable())?;
    let scopes = grant.scope.clone().unwrap_or_else(|| record.scopes.clone());
    super::linking::ProviderTokens::from_grant(&grant, &scopes, app.now()).apply(&mut record);
    app.oauth.update(&record).await?;
    Ok(grant.access_token)
}

#[cfg(test)]
mod tests {
    use super::has_scopes;

    #[test]
    fn scopes_must_all_be_granted() {
        assert!(has_scopes("openid email", None));
        assert!(has_scopes("openid email", Some("email")));
        assert!(has_scopes("repo,user:email", Some("repo")));
        assert!(!has_scopes("openid", Some("openid email")));
    }
}
