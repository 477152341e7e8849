//! Users (20 §2): `/users/me` for the signed-in user, `/users` for servers.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers::AccessType;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::access::{Access, AnyAccess, ServerAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonValue, NoQuery, Query};
use crate::state::AppState;

use super::JsonText;

/// The client read shape (20 §1.2): the client fields of the server document, copied as they
/// are (fields in name order, as the server document has them), the selected team in its client
/// shape.
#[derive(Deserialize, Serialize)]
struct ClientUser<'a> {
    #[serde(borrow)]
    auth_with_email: &'a RawValue,
    #[serde(borrow)]
    client_metadata: &'a RawValue,
    #[serde(borrow)]
    client_read_only_metadata: &'a RawValue,
    #[serde(borrow)]
    display_name: &'a RawValue,
    #[serde(borrow)]
    has_password: &'a RawValue,
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(borrow)]
    is_anonymous: &'a RawValue,
    #[serde(borrow)]
    is_restricted: &'a RawValue,
    #[serde(borrow)]
    oauth_providers: &'a RawValue,
    #[serde(borrow)]
    otp_auth_enabled: &'a RawValue,
    #[serde(borrow)]
    passkey_auth_enabled: &'a RawValue,
    #[serde(borrow)]
    primary_email: &'a RawValue,
    #[serde(borrow)]
    primary_email_verified: &'a RawValue,
    #[serde(borrow)]
    profile_image_url: &'a RawValue,
    #[serde(borrow)]
    requires_totp_mfa: &'a RawValue,
    #[serde(borrow)]
    restricted_by_admin: &'a RawValue,
    #[serde(borrow)]
    restricted_by_admin_reason: &'a RawValue,
    #[serde(borrow)]
    restricted_reason: &'a RawValue,
    selected_team: Value,
    #[serde(borrow)]
    selected_team_id: &'a RawValue,
    #[serde(borrow)]
    signed_up_at_millis: &'a RawValue,
}

fn bad_document() -> ApiError {
    ApiError::new(ErrorCode::InternalServerError, "Bad user document.")
}

/// The user as `access` may see it: the server document as auth composed it, or its client
/// subset.
fn shaped(access: &Access, json: String) -> ApiResult<JsonText> {
    if access.access_type != AccessType::Client {
        return Ok(JsonText(json));
    }
    let mut client: ClientUser = serde_json::from_str(&json).map_err(|_| bad_document())?;
    client.selected_team = super::teams::team_shape(access, client.selected_team);
    serde_json::to_string(&client)
        .map(JsonText)
        .map_err(|_| bad_document())
}

fn me(access: &Access) -> ApiResult<String> {
    access.user_id().map(|u| u.to_string()).ok_or_else(|| {
        ApiError::new(
            ErrorCode::CannotGetOwnUserWithoutUser,
            "`/users/me` needs a signed-in user.",
        )
    })
}

pub(crate) async fn get_user(
    app: &AppState,
    access: &Access,
    user_id: String,
) -> ApiResult<JsonText> {
    let user = app
        .users
        .clone()
        .get_user(access.request(pb::UserRef { user_id }))
        .await?
        .into_inner();
    shaped(access, user.json)
}

pub(crate) async fn update_user(
    app: &AppState,
    access: &Access,
    user_id: String,
    body: Value,
) -> ApiResult<JsonText> {
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
    shaped(access, user.json)
}

pub(crate) async fn delete_user(
    app: &AppState,
    access: &Access,
    user_id: String,
) -> ApiResult<Json<Value>> {
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
) -> ApiResult<JsonText> {
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
) -> ApiResult<JsonText> {
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
           ("team_id" = Option<String>, Query, description = "members of a team"), ("include_restricted" = Option<bool>, Query, description = "include restricted users"),
           ("include_anonymous" = Option<bool>, Query, description = "include anonymous (and restricted) users"), ("only_anonymous" = Option<bool>, Query, description = "only anonymous users; needs include_anonymous=true")),
    responses((status = 200, description = "Paginated users")))]
pub async fn list(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Query(q): Query<ListQuery>,
) -> ApiResult<JsonText> {
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
        include_anonymous: q.include_anonymous.unwrap_or(false),
        only_anonymous: q.only_anonymous.unwrap_or(false),
    };
    let page = users_page(&app, &access, request).await?;
    // The users as auth composed them, written into the page without parsing them again.
    #[derive(Serialize)]
    struct Pagination {
        next_cursor: Option<String>,
    }
    #[derive(Serialize)]
    struct Page<'a> {
        is_paginated: bool,
        items: Vec<&'a RawValue>,
        pagination: Pagination,
    }
    let items = page
        .items_json
        .iter()
        .map(|j| serde_json::from_str::<&RawValue>(j))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad_document())?;
    let body = Page {
        is_paginated: true,
        items,
        pagination: Pagination {
            next_cursor: page.next_cursor,
        },
    };
    serde_json::to_string(&body)
        .map(JsonText)
        .map_err(|_| bad_document())
}

/// A page of users (server documents) as auth lists it.
pub(crate) async fn users_page(
    app: &AppState,
    access: &Access,
    request: pb::ListUsersRequest,
) -> ApiResult<pb::UserPage> {
    Ok(app
        .users
        .clone()
        .list_users(access.request(request))
        .await?
        .into_inner())
}

#[utoipa::path(post, path = "/api/v1/users", tag = "users",
    request_body(content = Object, description = "The SC fields of 20 §1.1, all optional"),
    responses((status = 201, description = "The new user")))]
pub async fn create(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<(StatusCode, JsonText)> {
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
    Ok((StatusCode::CREATED, shaped(&access, user.json)?))
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
) -> ApiResult<JsonText> {
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
) -> ApiResult<JsonText> {
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
