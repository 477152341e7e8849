//! A user's OAuth provider records (10 §5) and connected accounts (10 §6).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::headers::AccessType;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{Access, AnyAccess, ServerAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

/// Clients do not see the provider-side account id.
fn shaped(access: &Access, text: &str) -> ApiResult<Value> {
    let mut record: Value = serde_json::from_str(text)
        .map_err(|_| ApiError::schema("malformed record from the auth service"))?;
    if access.access_type == AccessType::Client {
        if let Some(o) = record.as_object_mut() {
            o.remove("account_id");
        }
    }
    Ok(record)
}

fn list_of(access: &Access, list: pb::JsonList) -> ApiResult<Json<Value>> {
    let items = list
        .items_json
        .iter()
        .map(|t| shaped(access, t))
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    user_id: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/oauth-providers", tag = "oauth",
    params(("user_id" = Option<String>, Query, description = "UUID or `me`; clients get their own records")),
    responses((status = 200, description = "Provider records (not paginated)")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let user = match q.user_id.as_deref() {
        Some(u) => Some(access.resolve_user(u)?),
        None if access.access_type == AccessType::Client => Some(access.resolve_user("me")?),
        None => None,
    };
    let request = pb::ListRecordsRequest {
        user_id: user.map(|u| u.to_string()),
    };
    let list = app
        .oauth
        .clone()
        .list_records(access.request(request))
        .await?
        .into_inner();
    list_of(&access, list)
}

#[utoipa::path(post, path = "/api/v1/oauth-providers", tag = "oauth",
    request_body(content = Object, description = "user_id (UUID or `me`), provider_config_id, account_id, allow_sign_in, allow_connected_accounts, email?"),
    responses((status = 201, description = "The record"), (status = 400, description = "OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN")))]
pub async fn create(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Value>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let user = body["user_id"]
        .as_str()
        .ok_or_else(|| ApiError::schema("user_id is required"))?;
    let user = access.resolve_user(user)?;
    let request = pb::WriteRecordRequest {
        user_id: user.to_string(),
        record_id: String::new(),
        body_json: body.to_string(),
    };
    let created = app
        .oauth
        .clone()
        .create_record(access.request(request))
        .await?
        .into_inner();
    Ok((StatusCode::CREATED, Json(shaped(&access, &created.json)?)))
}

fn record_ref(access: &Access, user_id: &str, record_id: String) -> ApiResult<pb::RecordRef> {
    Ok(pb::RecordRef {
        user_id: access.resolve_user(user_id)?.to_string(),
        record_id,
    })
}

#[utoipa::path(get, path = "/api/v1/oauth-providers/{user_id}/{provider_id}", tag = "oauth",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("provider_id" = String, Path, description = "record id")),
    responses((status = 200, description = "The record"), (status = 404, description = "OAUTH_PROVIDER_RECORD_NOT_FOUND")))]
pub async fn get(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, record_id)): Path<(String, String)>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let request = record_ref(&access, &user_id, record_id)?;
    let record = app
        .oauth
        .clone()
        .get_record(access.request(request))
        .await?
        .into_inner();
    Ok(Json(shaped(&access, &record.json)?))
}

#[utoipa::path(patch, path = "/api/v1/oauth-providers/{user_id}/{provider_id}", tag = "oauth",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("provider_id" = String, Path, description = "record id")),
    request_body(content = Object, description = "allow_sign_in?, allow_connected_accounts?; servers also email?, account_id?"),
    responses((status = 200, description = "The record")))]
pub async fn update(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, record_id)): Path<(String, String)>,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Value>,
) -> ApiResult<Json<Value>> {
    let r = record_ref(&access, &user_id, record_id)?;
    let request = pb::WriteRecordRequest {
        user_id: r.user_id,
        record_id: r.record_id,
        body_json: body.to_string(),
    };
    let record = app
        .oauth
        .clone()
        .update_record(access.request(request))
        .await?
        .into_inner();
    Ok(Json(shaped(&access, &record.json)?))
}

#[utoipa::path(delete, path = "/api/v1/oauth-providers/{user_id}/{provider_id}", tag = "oauth",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("provider_id" = String, Path, description = "record id")),
    responses((status = 200, description = "success")))]
pub async fn delete(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, record_id)): Path<(String, String)>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let request = record_ref(&access, &user_id, record_id)?;
    app.oauth
        .clone()
        .delete_record(access.request(request))
        .await?;
    Ok(Json(json!({ "success": true })))
}

#[utoipa::path(get, path = "/api/v1/connected-accounts/{user_id}", tag = "oauth",
    params(("user_id" = String, Path, description = "UUID or `me`")),
    responses((status = 200, description = "user_id, provider, provider_account_id of records usable for API access")))]
pub async fn connected(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(user_id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let request = pb::UserRef {
        user_id: access.resolve_user(&user_id)?.to_string(),
    };
    let list = app
        .oauth
        .clone()
        .list_connected_accounts(access.request(request))
        .await?
        .into_inner();
    let items = list
        .items_json
        .iter()
        .map(|t| serde_json::from_str(t).unwrap_or(Value::Null))
        .collect::<Vec<Value>>();
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessTokenBody {
    scope: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/connected-accounts/{user_id}/{provider_id}/access-token", tag = "oauth",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("provider_id" = String, Path, description = "configured provider id")),
    request_body(content = Object, description = "scope?"),
    responses((status = 201, description = "access_token: a live provider access token")))]
pub async fn access_token(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, provider_id)): Path<(String, String)>,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<AccessTokenBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let request = pb::ConnectedAccessTokenRequest {
        user_id: access.resolve_user(&user_id)?.to_string(),
        provider_id,
        scope: body.scope,
    };
    let token = app
        .oauth
        .clone()
        .connected_access_token(access.request(request))
        .await?
        .into_inner();
    Ok((
        StatusCode::CREATED,
        Json(json!({ "access_token": token.access_token })),
    ))
}
