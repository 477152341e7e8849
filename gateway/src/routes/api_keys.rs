//! API keys of users and teams (README "User and team API keys"), as Stack Auth's
//! `/user-api-keys` and `/team-api-keys`. Each route is a thin handler over one of the shared
//! functions below, which take the family ("user" or "team").

use axum::extract::{Path, State};
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::ErrorCode;
use pb::owned_key_owner::Owner;
use serde::Deserialize;
use serde_json::{json, Value};

use super::JsonText;
use crate::access::{Access, AnyAccess, ServerAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, Query};
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserQuery {
    user_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamQuery {
    team_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUserKey {
    user_id: String,
    description: String,
    expires_at_millis: Option<i64>,
    is_public: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTeamKey {
    team_id: String,
    description: String,
    expires_at_millis: Option<i64>,
    is_public: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    description: Option<String>,
    /// Only `true`: a revocation is final.
    revoked: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    api_key: String,
}

fn user_owner(access: &Access, text: Option<&str>) -> Result<Owner, ApiError> {
    let text = text.ok_or_else(|| ApiError::schema("user_id is required for user API keys"))?;
    Ok(Owner::UserId(access.resolve_user(text)?.to_string()))
}

fn team_owner(text: Option<&str>) -> Result<Owner, ApiError> {
    let text = text.ok_or_else(|| ApiError::schema("team_id is required for team API keys"))?;
    uuid::Uuid::parse_str(text).map_err(|_| ApiError::schema("team_id must be a UUID"))?;
    Ok(Owner::TeamId(text.to_owned()))
}

async fn create(
    app: AppState,
    access: Access,
    owner: Owner,
    description: String,
    expires_at_millis: Option<i64>,
    is_public: Option<bool>,
) -> ApiResult<JsonText> {
    let request = pb::CreateOwnedKeyRequest {
        owner: Some(pb::OwnedKeyOwner { owner: Some(owner) }),
        description,
        expires_at_millis,
        is_public: is_public.unwrap_or(false),
    };
    let key = app
        .owned_keys
        .clone()
        .create_owned_key(access.request(request))
        .await?;
    Ok(JsonText(key.into_inner().json))
}

async fn list(app: AppState, access: Access, owner: Owner) -> ApiResult<Json<Value>> {
    let request = pb::OwnedKeyOwner { owner: Some(owner) };
    let keys = app
        .owned_keys
        .clone()
        .list_owned_keys(access.request(request))
        .await?
        .into_inner();
    let items = keys
        .items_json
        .iter()
        .map(|j| serde_json::from_str(j))
        .collect::<Result<Vec<Value>, _>>()
        .map_err(|e| {
            ApiError::new(
                ErrorCode::InternalServerError,
                format!("auth sent a key that is not JSON: {e}"),
            )
        })?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

async fn get(app: AppState, access: Access, kind: &str, id: String) -> ApiResult<JsonText> {
    let request = pb::OwnedKeyRef {
        kind: kind.into(),
        id,
    };
    let key = app
        .owned_keys
        .clone()
        .get_owned_key(access.request(request))
        .await?;
    Ok(JsonText(key.into_inner().json))
}

async fn update(
    app: AppState,
    access: Access,
    kind: &str,
    id: String,
    body: Update,
) -> ApiResult<JsonText> {
    if body.revoked == Some(false) {
        return Err(ApiError::schema(
            "revoked can only be true: a revoked key stays revoked",
        ));
    }
    let request = pb::UpdateOwnedKeyRequest {
        kind: kind.into(),
        id,
        description: body.description,
        revoke: body.revoked == Some(true),
    };
    let key = app
        .owned_keys
        .clone()
        .update_owned_key(access.request(request))
        .await?;
    Ok(JsonText(key.into_inner().json))
}

async fn check(app: AppState, access: Access, kind: &str, api_key: String) -> ApiResult<JsonText> {
    let request = pb::CheckOwnedKeyRequest {
        kind: kind.into(),
        api_key,
    };
    let key = app
        .owned_keys
        .clone()
        .check_owned_key(access.request(request))
        .await?;
    Ok(JsonText(key.into_inner().json))
}

#[utoipa::path(get, path = "/api/v1/user-api-keys", tag = "api-keys",
    params(("user_id" = String, Query, description = "UUID or `me`; clients: their own")),
    responses((status = 200, description = "items: the user's keys, newest first, value: {last_four}"),
        (status = 400, description = "API_KEYS_NOT_ENABLED (allow_user_api_keys), SCHEMA_ERROR"),
        (status = 403, description = "CLIENT_ACCESS_OWN_USER_ONLY")))]
pub async fn list_user(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<UserQuery>,
) -> ApiResult<Json<Value>> {
    let owner = user_owner(&access, q.user_id.as_deref())?;
    list(app, access, owner).await
}

#[utoipa::path(post, path = "/api/v1/user-api-keys", tag = "api-keys",
    request_body(content = Object, description = "user_id (UUID or `me`), description, expires_at_millis (null: never), is_public?"),
    responses((status = 200, description = "The key; value is the whole secret, shown this once"),
        (status = 400, description = "API_KEYS_NOT_ENABLED, SCHEMA_ERROR"),
        (status = 403, description = "CLIENT_ACCESS_OWN_USER_ONLY"), (status = 404, description = "USER_NOT_FOUND")))]
pub async fn create_user(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    extract::Json(body): extract::Json<CreateUserKey>,
) -> ApiResult<JsonText> {
    let owner = user_owner(&access, Some(&body.user_id))?;
    let (description, expires, public) = (body.description, body.expires_at_millis, body.is_public);
    create(app, access, owner, description, expires, public).await
}

#[utoipa::path(get, path = "/api/v1/user-api-keys/{api_key_id}", tag = "api-keys",
    params(("api_key_id" = String, Path), ("user_id" = Option<String>, Query, description = "ignored; the key names its owner")),
    responses((status = 200, description = "The key, value: {last_four}"), (status = 404, description = "API_KEY_NOT_FOUND")))]
pub async fn get_user(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    Query(_): Query<UserQuery>,
) -> ApiResult<JsonText> {
    get(app, access, "user", id).await
}

#[utoipa::path(patch, path = "/api/v1/user-api-keys/{api_key_id}", tag = "api-keys",
    params(("api_key_id" = String, Path), ("user_id" = Option<String>, Query, description = "ignored")),
    request_body(content = Object, description = "description?, revoked?: true (final)"),
    responses((status = 200, description = "The key, with manually_revoked_at_millis once revoked"),
        (status = 404, description = "API_KEY_NOT_FOUND")))]
pub async fn update_user(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    Query(_): Query<UserQuery>,
    extract::Json(body): extract::Json<Update>,
) -> ApiResult<JsonText> {
    update(app, access, "user", id, body).await
}

#[utoipa::path(post, path = "/api/v1/user-api-keys/check", tag = "api-keys",
    request_body(content = Object, description = "api_key"),
    responses((status = 200, description = "Whose the key is: the key, value: {last_four}"),
        (status = 400, description = "WRONG_API_KEY_TYPE (details expected_type, actual_type), API_KEYS_NOT_ENABLED"),
        (status = 401, description = "API_KEY_REVOKED, API_KEY_EXPIRED; INSUFFICIENT_ACCESS_TYPE for clients"),
        (status = 404, description = "API_KEY_NOT_FOUND")))]
pub async fn check_user(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    extract::Json(body): extract::Json<Check>,
) -> ApiResult<JsonText> {
    check(app, access, "user", body.api_key).await
}

#[utoipa::path(get, path = "/api/v1/team-api-keys", tag = "api-keys",
    params(("team_id" = String, Query)),
    responses((status = 200, description = "items: the team's keys, newest first"),
        (status = 400, description = "API_KEYS_NOT_ENABLED (allow_team_api_keys), SCHEMA_ERROR"),
        (status = 404, description = "API_KEY_NOT_FOUND (clients without $manage_api_keys), TEAM_NOT_FOUND")))]
pub async fn list_team(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<TeamQuery>,
) -> ApiResult<Json<Value>> {
    let owner = team_owner(q.team_id.as_deref())?;
    list(app, access, owner).await
}

#[utoipa::path(post, path = "/api/v1/team-api-keys", tag = "api-keys",
    request_body(content = Object, description = "team_id, description, expires_at_millis (null: never), is_public?"),
    responses((status = 200, description = "The key; value is the whole secret, shown this once"),
        (status = 400, description = "API_KEYS_NOT_ENABLED, SCHEMA_ERROR"),
        (status = 404, description = "API_KEY_NOT_FOUND (clients without $manage_api_keys), TEAM_NOT_FOUND")))]
pub async fn create_team(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    extract::Json(body): extract::Json<CreateTeamKey>,
) -> ApiResult<JsonText> {
    let owner = team_owner(Some(&body.team_id))?;
    let (description, expires, public) = (body.description, body.expires_at_millis, body.is_public);
    create(app, access, owner, description, expires, public).await
}

#[utoipa::path(get, path = "/api/v1/team-api-keys/{api_key_id}", tag = "api-keys",
    params(("api_key_id" = String, Path), ("team_id" = Option<String>, Query, description = "ignored; the key names its team")),
    responses((status = 200, description = "The key, value: {last_four}"), (status = 404, description = "API_KEY_NOT_FOUND")))]
pub async fn get_team(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    Query(_): Query<TeamQuery>,
) -> ApiResult<JsonText> {
    get(app, access, "team", id).await
}

#[utoipa::path(patch, path = "/api/v1/team-api-keys/{api_key_id}", tag = "api-keys",
    params(("api_key_id" = String, Path), ("team_id" = Option<String>, Query, description = "ignored")),
    request_body(content = Object, description = "description?, revoked?: true (final)"),
    responses((status = 200, description = "The key, with manually_revoked_at_millis once revoked"),
        (status = 404, description = "API_KEY_NOT_FOUND")))]
pub async fn update_team(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    Query(_): Query<TeamQuery>,
    extract::Json(body): extract::Json<Update>,
) -> ApiResult<JsonText> {
    update(app, access, "team", id, body).await
}

#[utoipa::path(post, path = "/api/v1/team-api-keys/check", tag = "api-keys",
    request_body(content = Object, description = "api_key"),
    responses((status = 200, description = "Whose the key is: the key, value: {last_four}"),
        (status = 400, description = "WRONG_API_KEY_TYPE (details expected_type, actual_type), API_KEYS_NOT_ENABLED"),
        (status = 401, description = "API_KEY_REVOKED, API_KEY_EXPIRED; INSUFFICIENT_ACCESS_TYPE for clients"),
        (status = 404, description = "API_KEY_NOT_FOUND")))]
pub async fn check_team(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    extract::Json(body): extract::Json<Check>,
) -> ApiResult<JsonText> {
    check(app, access, "team", body.api_key).await
}
