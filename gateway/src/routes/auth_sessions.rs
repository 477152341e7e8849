//! Sessions (20 §3): list, create (server), delete, sign out, refresh.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{Access, AnyAccess, ServerAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserQuery {
    user_id: Option<String>,
}

fn required_user(q: UserQuery) -> Result<String, ApiError> {
    q.user_id
        .ok_or_else(|| ApiError::schema("query parameter user_id is required"))
}

#[utoipa::path(get, path = "/api/v1/auth/sessions", tag = "sessions",
    params(("user_id" = String, Query, description = "UUID or `me`; clients: their own")),
    responses((status = 200, description = "The user's sessions, newest first")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<UserQuery>,
) -> ApiResult<Json<Value>> {
    let user = access.resolve_user(&required_user(q)?)?;
    let items = sessions_of(&app, &access, user).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

/// The user's sessions as the API lists them.
pub(crate) async fn sessions_of(
    app: &AppState,
    access: &Access,
    user: uuid::Uuid,
) -> ApiResult<Vec<Value>> {
    let request = pb::ListSessionsRequest {
        user_id: user.to_string(),
        current_session_id: access.session_id().map(|s| s.to_string()),
    };
    let list = app
        .users
        .clone()
        .list_sessions(access.request(request))
        .await?
        .into_inner();
    Ok(super::parsed(&list.items_json))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Create {
    user_id: String,
    expires_in_millis: Option<i64>,
    is_impersonation: Option<bool>,
}

#[utoipa::path(post, path = "/api/v1/auth/sessions", tag = "sessions",
    request_body(content = Object, description = "user_id, expires_in_millis?, is_impersonation?"),
    responses((status = 200, description = "refresh_token, access_token"), (status = 400, description = "USER_ID_DOES_NOT_EXIST")))]
pub async fn create(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Create>,
) -> ApiResult<Json<Value>> {
    let user = access.resolve_user(&body.user_id)?;
    let expires = body.expires_in_millis.unwrap_or(0);
    if body.expires_in_millis.is_some_and(|e| e < 1) {
        return Err(ApiError::schema("expires_in_millis must be positive"));
    }
    let request = pb::CreateSessionRequest {
        user_id: user.to_string(),
        expires_in_millis: expires,
        is_impersonation: body.is_impersonation.unwrap_or(false),
    };
    let r = app
        .users
        .clone()
        .create_session(access.request(request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "refresh_token": r.refresh_token, "access_token": r.access_token }),
    ))
}

#[utoipa::path(delete, path = "/api/v1/auth/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id"), ("user_id" = String, Query, description = "required (Stack compatibility)")),
    responses((status = 200, description = "success"), (status = 404, description = "SESSION_NOT_FOUND")))]
pub async fn delete(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    Query(q): Query<UserQuery>,
) -> ApiResult<Json<Value>> {
    access.resolve_user(&required_user(q)?)?;
    end_session(&app, &access, id).await?;
    Ok(Json(json!({ "success": true })))
}

/// Ends a session; this gateway refuses its tokens before answering, the others on the event.
pub(crate) async fn end_session(app: &AppState, access: &Access, id: String) -> ApiResult<()> {
    let ended = uuid::Uuid::parse_str(&id).ok();
    let request = pb::DeleteSessionRequest {
        session_id: id,
        current_session_id: access.session_id().map(|s| s.to_string()),
    };
    app.users
        .clone()
        .delete_session(access.request(request))
        .await?;
    app.revocations.sessions_ended(ended);
    Ok(())
}

fn refresh_header(request_headers: &HeaderMap) -> Option<String> {
    headers::read(request_headers, headers::REFRESH_TOKEN)
        .ok()
        .flatten()
        .map(str::to_owned)
}

#[utoipa::path(delete, path = "/api/v1/auth/sessions/current", tag = "sessions",
    responses((status = 200, description = "Signed out"), (status = 401, description = "USER_AUTHENTICATION_REQUIRED, REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED")))]
pub async fn sign_out(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    request_headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let request = pb::SignOutRequest {
        session_id: access.session_id().map(|s| s.to_string()),
        refresh_token: refresh_header(&request_headers).filter(|_| access.session_id().is_none()),
    };
    app.users.clone().sign_out(access.request(request)).await?;
    app.revocations.sessions_ended(access.session_id());
    Ok(Json(json!({ "success": true })))
}

#[utoipa::path(post, path = "/api/v1/auth/sessions/current/refresh", tag = "sessions",
    responses((status = 200, description = "access_token (and refresh_token when the project rotates them)"),
              (status = 401, description = "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED")))]
pub async fn refresh(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    request_headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let refresh_token = refresh_header(&request_headers).ok_or_else(|| {
        ApiError::new(
            ErrorCode::RefreshTokenNotFoundOrExpired,
            "The refresh-token header is required.",
        )
    })?;
    let r = app
        .users
        .clone()
        .refresh_session(access.request(pb::RefreshSessionRequest { refresh_token }))
        .await?
        .into_inner();
    let mut out = json!({ "access_token": r.access_token });
    if let Some(rotated) = r.refresh_token {
        out["refresh_token"] = json!(rotated);
    }
    Ok(Json(out))
}
