//! Team invitations (30 §4).

use axum::extract::{Path, State};
use axum::Json;
use latchkey_proto::teams::v1 as pb;
use latchkey_shared::error::ErrorCode;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth_password::check_code;
use crate::access::{Access, AnyAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Send {
    team_id: String,
    email: String,
    callback_url: String,
    permission_ids: Option<Vec<String>>,
}

#[utoipa::path(post, path = "/api/v1/team-invitations/send-code", tag = "teams",
    request_body(content = Object, description = "team_id, email, callback_url, permission_ids?"),
    responses((status = 200, description = "success and the invitation id")))]
pub async fn send(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Send>,
) -> ApiResult<Json<Value>> {
    if uuid::Uuid::parse_str(&body.team_id).is_err() {
        return Err(ApiError::schema("team_id must be a UUID"));
    }
    let request = pb::SendInvitationRequest {
        team_id: body.team_id,
        email: body.email,
        callback_url: body.callback_url,
        permission_ids: body.permission_ids.unwrap_or_default(),
    };
    let id = app
        .teams
        .clone()
        .send_invitation(access.request(request))
        .await?
        .into_inner()
        .id;
    Ok(Json(json!({ "success": true, "id": id })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    team_id: Option<String>,
    user_id: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/team-invitations", tag = "teams",
    params(("team_id" = Option<String>, Query, description = "pending invitations of a team"), ("user_id" = Option<String>, Query, description = "pending invitations to a user's verified addresses")),
    responses((status = 200, description = "id, team_id, expires_at_millis, recipient_email")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let user_id = q
        .user_id
        .as_deref()
        .map(|u| access.resolve_user(u))
        .transpose()?
        .map(|u| u.to_string());
    if q.team_id
        .as_deref()
        .is_some_and(|t| uuid::Uuid::parse_str(t).is_err())
    {
        return Err(ApiError::schema("team_id must be a UUID"));
    }
    let request = pb::ListInvitationsRequest {
        team_id: q.team_id,
        user_id,
    };
    let items = invitations(&app, &access, request).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

/// Pending invitations.
pub(crate) async fn invitations(
    app: &AppState,
    access: &Access,
    request: pb::ListInvitationsRequest,
) -> ApiResult<Vec<Value>> {
    let list = app
        .teams
        .clone()
        .list_invitations(access.request(request))
        .await?
        .into_inner();
    Ok(super::parsed(&list.items_json))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamQuery {
    team_id: Option<String>,
}

#[utoipa::path(delete, path = "/api/v1/team-invitations/{id}", tag = "teams",
    params(("id" = String, Path, description = "Invitation id"), ("team_id" = String, Query, description = "its team (required)")),
    responses((status = 200, description = "success")))]
pub async fn revoke(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    Query(q): Query<TeamQuery>,
) -> ApiResult<Json<Value>> {
    let team_id = q
        .team_id
        .ok_or_else(|| ApiError::new(ErrorCode::BadRequest, "team_id is required."))?;
    if uuid::Uuid::parse_str(&team_id).is_err() {
        return Err(ApiError::schema("team_id must be a UUID"));
    }
    let request = pb::InvitationRef {
        id,
        team_id,
        user_id: String::new(),
    };
    app.teams
        .clone()
        .revoke_invitation(access.request(request))
        .await?;
    Ok(Json(json!({ "success": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Code {
    code: String,
}

#[utoipa::path(post, path = "/api/v1/team-invitations/accept", tag = "teams",
    request_body(content = Object, description = "code"), responses((status = 200, description = "{}")))]
pub async fn accept(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Code>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    access.require_user()?;
    app.teams
        .clone()
        .accept_invitation(access.request(pb::InvitationCode { code: body.code }))
        .await?;
    Ok(Json(json!({})))
}

#[utoipa::path(post, path = "/api/v1/team-invitations/accept/details", tag = "teams",
    request_body(content = Object, description = "code"), responses((status = 200, description = "team_id, team_display_name")))]
pub async fn details(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Code>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    access.require_user()?;
    let details = app
        .teams
        .clone()
        .invitation_details(access.request(pb::InvitationCode { code: body.code }))
        .await?
        .into_inner();
    serde_json::from_str(&details.json)
        .map(Json)
        .map_err(|_| ApiError::new(ErrorCode::InternalServerError, "Bad details document."))
}

#[utoipa::path(post, path = "/api/v1/team-invitations/accept/check-code", tag = "teams",
    request_body(content = Object, description = "code"), responses((status = 200, description = "is_code_valid: true")))]
pub async fn check(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Code>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    app.teams
        .clone()
        .check_invitation_code(access.request(pb::InvitationCode { code: body.code }))
        .await?;
    Ok(Json(json!({ "is_code_valid": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserQuery {
    user_id: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/team-invitations/{id}/accept", tag = "teams",
    params(("id" = String, Path, description = "Invitation id"), ("user_id" = String, Query, description = "UUID or `me` (required)")),
    responses((status = 200, description = "{}")))]
pub async fn accept_by_id(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(id): Path<String>,
    Query(q): Query<UserQuery>,
) -> ApiResult<Json<Value>> {
    let user = q
        .user_id
        .ok_or_else(|| ApiError::schema("query parameter user_id is required"))?;
    let request = pb::InvitationRef {
        id,
        team_id: String::new(),
        user_id: access.resolve_user(&user)?.to_string(),
    };
    app.teams
        .clone()
        .accept_invitation_by_id(access.request(request))
        .await?;
    Ok(Json(json!({})))
}
