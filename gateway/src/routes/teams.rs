//! Teams, memberships and team permissions (30 §1–2, 50 §2).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::teams::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers::AccessType;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::access::{Access, AnyAccess, ServerAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonValue, NoQuery, Query};
use crate::state::AppState;

/// The team as `access` may see it (30 §1.1): clients get neither server metadata nor the
/// creation time.
pub fn team_shape(access: &Access, team: Value) -> Value {
    if access.access_type != AccessType::Client {
        return team;
    }
    match team {
        Value::Object(mut map) => {
            map.remove("server_metadata");
            map.remove("created_at_millis");
            Value::Object(map)
        }
        other => other,
    }
}

fn parse(json: &str) -> ApiResult<Value> {
    serde_json::from_str(json)
        .map_err(|_| ApiError::new(ErrorCode::InternalServerError, "Bad team document."))
}

/// A path team id that is not a UUID names no team (for clients: no membership).
fn team_id(access: &Access, text: &str) -> ApiResult<String> {
    uuid::Uuid::parse_str(text)
        .map(|u| u.to_string())
        .map_err(|_| match access.access_type {
            AccessType::Client => ApiError::new(
                ErrorCode::TeamMembershipNotFound,
                "No such team membership.",
            ),
            _ => ApiError::new(ErrorCode::TeamNotFound, "No such team."),
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserQuery {
    user_id: Option<String>,
}

/// A client must name itself in list queries (30 §1.2, 80 §11.13).
fn own_filter(access: &Access, user: Option<&str>) -> ApiResult<Option<String>> {
    match user {
        Some(u) => Ok(Some(access.resolve_user(u)?.to_string())),
        None if access.access_type == AccessType::Client => {
            if access.user_id().is_none() {
                return Err(ApiError::new(
                    ErrorCode::CannotGetOwnUserWithoutUser,
                    "Sign in first.",
                ));
            }
            Err(ApiError::new(
                ErrorCode::ClientAccessOwnUserOnly,
                "Clients must pass user_id=me.",
            ))
        }
        None => Ok(None),
    }
}

#[utoipa::path(get, path = "/api/v1/teams", tag = "teams",
    params(("user_id" = Option<String>, Query, description = "UUID or `me`; required for clients")),
    responses((status = 200, description = "Teams, oldest first")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<UserQuery>,
) -> ApiResult<Json<Value>> {
    let user_id = own_filter(&access, q.user_id.as_deref())?;
    let items = teams(&app, &access, user_id).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

/// The project's teams (or a user's), oldest first, as `access` may see them.
pub(crate) async fn teams(
    app: &AppState,
    access: &Access,
    user_id: Option<String>,
) -> ApiResult<Vec<Value>> {
    let list = app
        .teams
        .clone()
        .list_teams(access.request(pb::ListTeamsRequest { user_id }))
        .await?
        .into_inner();
    Ok(list
        .items_json
        .iter()
        .filter_map(|j| parse(j).ok())
        .map(|t| team_shape(access, t))
        .collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateQuery {
    add_current_user: Option<bool>,
}

/// Who becomes the creator member (30 §1.3).
fn creator(
    access: &Access,
    named: Option<&Value>,
    add_current_user: bool,
) -> ApiResult<Option<String>> {
    let named = match named {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(ApiError::schema("creator_user_id must be a string")),
    };
    let token_user = || access.require_user().map(|u| u.to_string());
    match (named, add_current_user) {
        (Some(_), true) => Err(ApiError::new(
            ErrorCode::BadRequest,
            "Send either creator_user_id or add_current_user.",
        )),
        (None, true) => token_user().map(Some),
        (Some(u), false) => Ok(Some(access.resolve_user(u)?.to_string())),
        (None, false) if access.access_type == AccessType::Client => token_user().map(Some),
        (None, false) => Ok(None),
    }
}

#[utoipa::path(post, path = "/api/v1/teams", tag = "teams",
    params(("add_current_user" = Option<bool>, Query, description = "deprecated: the token's user becomes the creator")),
    request_body(content = Object, description = "display_name, profile_image_url?, client_metadata?, creator_user_id?; servers also client_read_only_metadata?, server_metadata?"),
    responses((status = 201, description = "The team"), (status = 403, description = "CLIENT_TEAM_CREATION_DISABLED")))]
pub async fn create(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<CreateQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let mut body: Map<String, Value> = match body {
        Value::Object(map) => map,
        _ => return Err(ApiError::schema("The body must be a JSON object.")),
    };
    let named = body.remove("creator_user_id");
    let creator_user_id = creator(&access, named.as_ref(), q.add_current_user.unwrap_or(false))?;
    let request = pb::CreateTeamRequest {
        body_json: Value::Object(body).to_string(),
        creator_user_id,
    };
    let team = app
        .teams
        .clone()
        .create_team(access.request(request))
        .await?
        .into_inner();
    Ok((
        StatusCode::CREATED,
        Json(team_shape(&access, parse(&team.json)?)),
    ))
}

#[utoipa::path(get, path = "/api/v1/teams/{team_id}", tag = "teams",
    params(("team_id" = String, Path, description = "Team id")), responses((status = 200, description = "The team")))]
pub async fn get(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let team_id = team_id(&access, &id)?;
    team(&app, &access, team_id).await.map(Json)
}

pub(crate) async fn team(app: &AppState, access: &Access, team_id: String) -> ApiResult<Value> {
    let team = app
        .teams
        .clone()
        .get_team(access.request(pb::TeamRef { team_id }))
        .await?
        .into_inner();
    Ok(team_shape(access, parse(&team.json)?))
}

#[utoipa::path(patch, path = "/api/v1/teams/{team_id}", tag = "teams",
    params(("team_id" = String, Path, description = "Team id")),
    request_body(content = Object, description = "Any writable team field"), responses((status = 200, description = "The team")))]
pub async fn update(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<Json<Value>> {
    let request = pb::UpdateTeamRequest {
        team_id: team_id(&access, &id)?,
        body_json: body.to_string(),
    };
    let team = app
        .teams
        .clone()
        .update_team(access.request(request))
        .await?
        .into_inner();
    Ok(Json(team_shape(&access, parse(&team.json)?)))
}

#[utoipa::path(delete, path = "/api/v1/teams/{team_id}", tag = "teams",
    params(("team_id" = String, Path, description = "Team id")), responses((status = 200, description = "success")))]
pub async fn delete(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let team_id = team_id(&access, &id)?;
    app.teams
        .clone()
        .delete_team(access.request(pb::TeamRef { team_id }))
        .await?;
    Ok(Json(json!({ "success": true })))
}

#[utoipa::path(post, path = "/api/v1/team-memberships/{team_id}/{user_id}", tag = "teams",
    params(("team_id" = String, Path, description = "Team id"), ("user_id" = String, Path, description = "UUID or `me`")),
    responses((status = 201, description = "team_id, user_id"), (status = 409, description = "TEAM_MEMBERSHIP_ALREADY_EXISTS")))]
pub async fn add_member(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path((team, user)): Path<(String, String)>,
    _: Query<NoQuery>,
    JsonValue(_): JsonValue,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let member = pb::MemberRef {
        team_id: team_id(&access, &team)?,
        user_id: access.resolve_user(&user)?.to_string(),
    };
    let out = json!({ "team_id": member.team_id, "user_id": member.user_id });
    add(&app, &access, member).await?;
    Ok((StatusCode::CREATED, Json(out)))
}

pub(crate) async fn add(app: &AppState, access: &Access, member: pb::MemberRef) -> ApiResult<()> {
    app.teams.clone().add_member(access.request(member)).await?;
    Ok(())
}

pub(crate) async fn remove(
    app: &AppState,
    access: &Access,
    member: pb::MemberRef,
) -> ApiResult<()> {
    app.teams
        .clone()
        .remove_member(access.request(member))
        .await?;
    Ok(())
}

#[utoipa::path(delete, path = "/api/v1/team-memberships/{team_id}/{user_id}", tag = "teams",
    params(("team_id" = String, Path, description = "Team id"), ("user_id" = String, Path, description = "UUID or `me`")),
    responses((status = 200, description = "success")))]
pub async fn remove_member(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((team, user)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let user = if user == "me" {
        access.user_id().ok_or_else(|| {
            ApiError::new(
                ErrorCode::CannotGetOwnUserWithoutUser,
                "`me` needs a signed-in user.",
            )
        })?
    } else {
        uuid::Uuid::parse_str(&user)
            .map_err(|_| ApiError::schema("user_id must be a UUID or `me`"))?
    };
    let member = pb::MemberRef {
        team_id: team_id(&access, &team)?,
        user_id: user.to_string(),
    };
    remove(&app, &access, member).await?;
    Ok(Json(json!({ "success": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionQuery {
    team_id: Option<String>,
    user_id: Option<String>,
    permission_id: Option<String>,
    recursive: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/team-permissions", tag = "permissions",
    params(("team_id" = Option<String>, Query, description = "team"), ("user_id" = Option<String>, Query, description = "UUID or `me`; required for clients"),
           ("permission_id" = Option<String>, Query, description = "one permission"), ("recursive" = Option<bool>, Query, description = "expand containment")),
    responses((status = 200, description = "Grants sorted by team, user, id")))]
pub async fn list_permissions(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<PermissionQuery>,
) -> ApiResult<Json<Value>> {
    let user_id = own_filter(&access, q.user_id.as_deref())?;
    if q.team_id
        .as_deref()
        .is_some_and(|t| uuid::Uuid::parse_str(t).is_err())
    {
        return Err(ApiError::schema("team_id must be a UUID"));
    }
    let request = pb::ListTeamPermissionsRequest {
        team_id: q.team_id,
        user_id,
        permission_id: q.permission_id,
        recursive: q.recursive.unwrap_or(false),
    };
    let items = team_permissions(&app, &access, request).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

pub(crate) async fn team_permissions(
    app: &AppState,
    access: &Access,
    request: pb::ListTeamPermissionsRequest,
) -> ApiResult<Vec<Value>> {
    let list = app
        .teams
        .clone()
        .list_team_permissions(access.request(request))
        .await?
        .into_inner();
    Ok(list
        .items_json
        .iter()
        .filter_map(|j| parse(j).ok())
        .collect())
}

/// Permission ids: `^\$?[a-z0-9_:]+$`, and `$` ids must be system ids (50 §1).
fn permission_id(id: &str) -> ApiResult<String> {
    let body = id.strip_prefix('$').unwrap_or(id);
    let syntax = !body.is_empty()
        && body
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b':');
    const SYSTEM: [&str; 6] = [
        "$update_team",
        "$delete_team",
        "$read_members",
        "$remove_members",
        "$invite_members",
        "$manage_api_keys",
    ];
    if !syntax || (id.starts_with('$') && !SYSTEM.contains(&id)) {
        return Err(ApiError::schema(format!("not a valid permission id: {id}")));
    }
    Ok(id.to_owned())
}

fn grant_ref(
    access: &Access,
    team: &str,
    user: &str,
    permission: &str,
) -> ApiResult<pb::PermissionRef> {
    Ok(pb::PermissionRef {
        team_id: team_id(access, team)?,
        user_id: access.resolve_user(user)?.to_string(),
        permission_id: permission_id(permission)?,
    })
}

#[utoipa::path(post, path = "/api/v1/team-permissions/{team_id}/{user_id}/{permission_id}", tag = "permissions",
    params(("team_id" = String, Path, description = "Team id"), ("user_id" = String, Path, description = "UUID or `me`"), ("permission_id" = String, Path, description = "Permission id")),
    responses((status = 201, description = "id, user_id, team_id")))]
pub async fn grant(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path((team, user, permission)): Path<(String, String, String)>,
    _: Query<NoQuery>,
    JsonValue(_): JsonValue,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let g = grant_ref(&access, &team, &user, &permission)?;
    let out = json!({ "id": g.permission_id, "user_id": g.user_id, "team_id": g.team_id });
    app.teams
        .clone()
        .grant_team_permission(access.request(g))
        .await?;
    Ok((StatusCode::CREATED, Json(out)))
}

#[utoipa::path(delete, path = "/api/v1/team-permissions/{team_id}/{user_id}/{permission_id}", tag = "permissions",
    params(("team_id" = String, Path, description = "Team id"), ("user_id" = String, Path, description = "UUID or `me`"), ("permission_id" = String, Path, description = "Permission id")),
    responses((status = 200, description = "success"), (status = 404, description = "TEAM_PERMISSION_NOT_FOUND")))]
pub async fn revoke(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path((team, user, permission)): Path<(String, String, String)>,
) -> ApiResult<Json<Value>> {
    let g = grant_ref(&access, &team, &user, &permission)?;
    app.teams
        .clone()
        .revoke_team_permission(access.request(g))
        .await?;
    Ok(Json(json!({ "success": true })))
}
