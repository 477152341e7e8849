//! Users (20 §2): `/users/me` for the signed-in user, `/users` for servers.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers::AccessType;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::access::{Access, AnyAccess, ServerAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonValue, NoQuery, Query};
use crate::state::AppState;

/// Fields of the client read shape (20 §1.2).
const CLIENT_FIELDS: [&str; 21] = [
    "auth_with_email",
    "client_metadata",
    "client_read_only_metadata",
    "display_name",
    "has_password",
    "id",
    "is_anonymous",
    "is_restricted",
    "oauth_providers",
    "otp_auth_enabled",
    "passkey_auth_enabled",
    "primary_email",
    "primary_email_verified",
    "profile_image_url",
    "requires_totp_mfa",
    "restricted_by_admin",
    "restricted_by_admin_reason",
    "restricted_reason",
    "selected_team",
    "selected_team_id",
    "signed_up_at_millis",
];

/// The user as `access` may see it: the server shape, or its client subset.
fn shaped(access: &Access, json: &str) -> ApiResult<Value> {
    let user: Value = serde_json::from_str(json)
        .map_err(|_| ApiError::new(ErrorCode::InternalServerError, "Bad user document."))?;
    if access.access_type != AccessType::Client {
        return Ok(user);
    }
    let Value::Object(all) = user else {
        return Ok(Value::Null);
    };
    let mut client: Map<String, Value> = all
        .into_iter()
        .filter(|(k, _)| CLIENT_FIELDS.contains(&k.as_str()))
        .collect();
    if let Some(team) = client.remove("selected_team") {
        client.insert(
            "selected_team".into(),
            super::teams::team_shape(access, team),
        );
    }
    Ok(Value::Object(client))
}

fn me(access: &Access) -> ApiResult<String> {
    access.user_id().map(|u| u.to_string()).ok_or_else(|| {
        ApiError::new(
            ErrorCode::CannotGetOwnUserWithoutUser,
            "`/users/me` needs a signed-in user.",
        )
    })
}

async fn get_user(app: &AppState, access: &Access, user_id: String) -> ApiResult<Json<Value>> {
    let user = app
        .users
        .clone()
        .get_user(access.request(pb::UserRef { user_id }))
        .await?
        .into_inner();
    Ok(Json(shaped(access, &user.json)?))
}

async fn update_user(
    app: &AppState,
    access: &Access,
    user_id: String,
    body: Value,
) -> ApiResult<Json<Value>> {
    let request = pb::WriteUserRequest {
        user_id,
        body_json: body.to_string(),
    };
    let user = app
        .users
        .clone()
        .update_user(access.request(request))
        .await?
        .into_inner();
    Ok(Json(shaped(access, &user.json)?))
}

async fn delete_user(app: &AppState, access: &Access, user_id: String) -> ApiResult<Json<Value>> {
    let id = uuid::Uuid::parse_str(&user_id).ok();
    app.users
        .clone()
        .delete_user(access.request(pb::UserRef { user_id }))
        .await?;
    // This gateway refuses the user's tokens before answering; the others learn it from the
    // event, and auth answers for the user meanwhile.
    if let Some(id) = id {
        app.revocations.user_deleted(id);
    }
    Ok(Json(json!({ "success": true })))
}

#[utoipa::path(get, path = "/api/v1/users/me", tag = "users", responses((status = 200, description = "The signed-in user")))]
pub async fn get_me(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let id = me(&access)?;
    get_user(&app, &access, id).await
}

#[utoipa::path(patch, path = "/api/v1/users/me", tag = "users",
    request_body(content = Object, description = "Client: the CU fields of 20 §1.1; server: the SU fields"),
    responses((status = 200, description = "The updated user")))]
pub async fn update_me(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<Json<Value>> {
    let id = me(&access)?;
    update_user(&app, &access, id, body).await
}

#[utoipa::path(delete, path = "/api/v1/users/me", tag = "users", responses((status = 200, description = "success")))]
pub async fn delete_me(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let id = me(&access)?;
    delete_user(&app, &access, id).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<String>,
    cursor: Option<String>,
    order_by: Option<String>,
    desc: Option<bool>,
    query: Option<String>,
    team_id: Option<String>,
    include_restricted: Option<bool>,
    include_anonymous: Option<bool>,
    only_anonymous: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/users", tag = "users",
    params(("limit" = Option<u64>, Query, description = "page size"), ("cursor" = Option<String>, Query, description = "id of the first user of the page"),
           ("desc" = Option<bool>, Query, description = "newest first"), ("query" = Option<String>, Query, description = "id, name or e-mail search"),
           ("team_id" = Option<String>, Query, description = "members of a team"), ("include_restricted" = Option<bool>, Query, description = "include restricted users")),
    responses((status = 200, description = "Paginated users")))]
pub async fn list(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    if q.order_by.as_deref().is_some_and(|o| o != "signed_up_at") {
        return Err(ApiError::schema("order_by must be signed_up_at"));
    }
    if q.only_anonymous == Some(true) && q.include_anonymous != Some(true) {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "only_anonymous needs include_anonymous=true",
        ));
    }
    let limit = q
        .limit
        .map(|l| {
            l.parse::<i64>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| ApiError::schema("limit must be an integer of at least 1"))
        })
        .transpose()?;
    for (name, value) in [("cursor", &q.cursor), ("team_id", &q.team_id)] {
        if value
            .as_deref()
            .is_some_and(|v| uuid::Uuid::parse_str(v).is_err())
        {
            return Err(ApiError::schema(format!("{name} must be a UUID")));
        }
    }
    let request = pb::ListUsersRequest {
        limit,
        cursor: q.cursor,
        desc: q.desc.unwrap_or(false),
        query: q.query,
        team_id: q.team_id,
        include_restricted: q.include_restricted.unwrap_or(false),
    };
    let page = app
        .users
        .clone()
        .list_users(access.request(request))
        .await?
        .into_inner();
    let items: Vec<Value> = page
        .items_json
        .iter()
        .filter_map(|j| serde_json::from_str(j).ok())
        .collect();
    Ok(Json(
        json!({ "items": items, "is_paginated": true, "pagination": { "next_cursor": page.next_cursor } }),
    ))
}

#[utoipa::path(post, path = "/api/v1/users", tag = "users",
    request_body(content = Object, description = "The SC fields of 20 §1.1, all optional"),
    responses((status = 201, description = "The new user")))]
pub async fn create(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let request = pb::WriteUserRequest {
        user_id: String::new(),
        body_json: body.to_string(),
    };
    let user = app
        .users
        .clone()
        .create_user(access.request(request))
        .await?
        .into_inner();
    Ok((StatusCode::CREATED, Json(shaped(&access, &user.json)?)))
}

fn path_user(access: &Access, text: &str) -> ApiResult<String> {
    if text == "me" {
        return me(access);
    }
    uuid::Uuid::parse_str(text)
        .map(|u| u.to_string())
        .map_err(|_| ApiError::new(ErrorCode::UserNotFound, "No such user."))
}

#[utoipa::path(get, path = "/api/v1/users/{user_id}", tag = "users",
    params(("user_id" = String, Path, description = "UUID or `me`")), responses((status = 200, description = "The user"), (status = 404, description = "USER_NOT_FOUND")))]
pub async fn get(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let id = path_user(&access, &id)?;
    get_user(&app, &access, id).await
}

#[utoipa::path(patch, path = "/api/v1/users/{user_id}", tag = "users",
    params(("user_id" = String, Path, description = "UUID or `me`")),
    request_body(content = Object, description = "The SU fields of 20 §1.1"), responses((status = 200, description = "The updated user")))]
pub async fn update(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<Json<Value>> {
    let id = path_user(&access, &id)?;
    update_user(&app, &access, id, body).await
}

#[utoipa::path(delete, path = "/api/v1/users/{user_id}", tag = "users",
    params(("user_id" = String, Path, description = "UUID or `me`")), responses((status = 200, description = "success")))]
pub async fn delete(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let id = path_user(&access, &id)?;
    delete_user(&app, &access, id).await
}
