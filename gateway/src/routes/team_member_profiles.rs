//! Team member profiles (30 §3).

use axum::extract::{Path, State};
use axum::Json;
use latchkey_proto::teams::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers::AccessType;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{Access, AnyAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonValue, NoQuery, Query};
use crate::state::AppState;

/// Clients get the first four fields; servers also the full `user`.
fn shaped(access: &Access, json: &str) -> Value {
    let mut profile: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    if access.access_type == AccessType::Client {
        if let Value::Object(map) = &mut profile {
            map.remove("user");
        }
    }
    profile
}

fn uuid_or(text: &str, code: ErrorCode) -> ApiResult<String> {
    uuid::Uuid::parse_str(text)
        .map(|u| u.to_string())
        .map_err(|_| ApiError::new(code, "No such team membership."))
}

fn path_user(access: &Access, text: &str) -> ApiResult<String> {
    if text == "me" {
        return access.resolve_user(text).map(|u| u.to_string());
    }
    uuid_or(text, ErrorCode::TeamMembershipNotFound)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    team_id: Option<String>,
    user_id: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/team-member-profiles", tag = "teams",
    params(("team_id" = Option<String>, Query, description = "team; required for clients"), ("user_id" = Option<String>, Query, description = "UUID or `me`")),
    responses((status = 200, description = "Profiles, oldest membership first")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let user_id = match q.user_id.as_deref() {
        Some("me") => Some(access.resolve_user("me")?.to_string()),
        Some(u) => Some(
            uuid::Uuid::parse_str(u)
                .map_err(|_| ApiError::schema("user_id must be a UUID or `me`"))?
                .to_string(),
        ),
        None => None,
    };
    if q.team_id
        .as_deref()
        .is_some_and(|t| uuid::Uuid::parse_str(t).is_err())
    {
        return Err(ApiError::schema("team_id must be a UUID"));
    }
    let request = pb::ListProfilesRequest {
        team_id: q.team_id,
        user_id,
    };
    let items = profiles(&app, &access, request).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

/// Member profiles, oldest membership first, as `access` may see them.
pub(crate) async fn profiles(
    app: &AppState,
    access: &Access,
    request: pb::ListProfilesRequest,
) -> ApiResult<Vec<Value>> {
    let list = app
        .teams
        .clone()
        .list_member_profiles(access.request(request))
        .await?
        .into_inner();
    Ok(list.items_json.iter().map(|j| shaped(access, j)).collect())
}

#[utoipa::path(get, path = "/api/v1/team-member-profiles/{team_id}/{user_id}", tag = "teams",
    params(("team_id" = String, Path, description = "Team id"), ("user_id" = String, Path, description = "UUID or `me`")),
    responses((status = 200, description = "The profile"), (status = 404, description = "TEAM_MEMBERSHIP_NOT_FOUND")))]
pub async fn get(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((team, user)): Path<(String, String)>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let member = pb::MemberRef {
        team_id: uuid_or(&team, ErrorCode::TeamMembershipNotFound)?,
        user_id: path_user(&access, &user)?,
    };
    profile(&app, &access, member).await.map(Json)
}

/// One member's profile; the console checks membership with it too.
pub(crate) async fn profile(
    app: &AppState,
    access: &Access,
    member: pb::MemberRef,
) -> ApiResult<Value> {
    let profile = app
        .teams
        .clone()
        .get_member_profile(access.request(member))
        .await?
        .into_inner();
    Ok(shaped(access, &profile.json))
}

#[utoipa::path(patch, path = "/api/v1/team-member-profiles/{team_id}/{user_id}", tag = "teams",
    params(("team_id" = String, Path, description = "Team id"), ("user_id" = String, Path, description = "UUID or `me`")),
    request_body(content = Object, description = "display_name?, profile_image_url?"),
    responses((status = 200, description = "The profile")))]
pub async fn update(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((team, user)): Path<(String, String)>,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<Json<Value>> {
    // A client may only edit its own profile (30 §3).
    let user_id = if access.access_type == AccessType::Client {
        access.resolve_user(&user)?.to_string()
    } else {
        path_user(&access, &user)?
    };
    let request = pb::UpdateProfileRequest {
        team_id: uuid_or(&team, ErrorCode::TeamMembershipNotFound)?,
        user_id,
        body_json: body.to_string(),
    };
    let profile = app
        .teams
        .clone()
        .update_member_profile(access.request(request))
        .await?
        .into_inner();
    Ok(Json(shaped(&access, &profile.json)))
}
