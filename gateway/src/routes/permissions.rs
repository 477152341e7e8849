//! Project permissions (50 §3) and permission definitions (50 §4, admin).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::teams::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers::AccessType;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{Access, AdminAccess, AnyAccess, ServerAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonValue, NoQuery, Query};
use crate::state::AppState;

fn items(list: pb::JsonList) -> Json<Value> {
    let items: Vec<Value> = list
        .items_json
        .iter()
        .filter_map(|j| serde_json::from_str(j).ok())
        .collect();
    Json(json!({ "items": items, "is_paginated": false }))
}

fn parse(json: &str) -> ApiResult<Value> {
    serde_json::from_str(json)
        .map_err(|_| ApiError::new(ErrorCode::InternalServerError, "Bad permission document."))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    user_id: Option<String>,
    permission_id: Option<String>,
    recursive: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/project-permissions", tag = "permissions",
    params(("user_id" = Option<String>, Query, description = "UUID or `me`; required for clients"), ("permission_id" = Option<String>, Query, description = "one permission"),
           ("recursive" = Option<bool>, Query, description = "expand containment")),
    responses((status = 200, description = "Grants sorted by user, id")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let user_id = match q.user_id.as_deref() {
        Some(u) => Some(access.resolve_user(u)?.to_string()),
        None if access.access_type == AccessType::Client => {
            access.user_id().ok_or_else(|| {
                ApiError::new(ErrorCode::CannotGetOwnUserWithoutUser, "Sign in first.")
            })?;
            return Err(ApiError::new(
                ErrorCode::ClientAccessOwnUserOnly,
                "Clients must pass user_id=me.",
            ));
        }
        None => None,
    };
    let request = pb::ListProjectPermissionsRequest {
        user_id,
        permission_id: q.permission_id,
        recursive: q.recursive.unwrap_or(false),
    };
    Ok(items(
        app.teams
            .clone()
            .list_project_permissions(access.request(request))
            .await?
            .into_inner(),
    ))
}

#[utoipa::path(post, path = "/api/v1/project-permissions/{user_id}/{permission_id}", tag = "permissions",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("permission_id" = String, Path, description = "Permission id")),
    responses((status = 201, description = "id, user_id"), (status = 404, description = "PERMISSION_NOT_FOUND, WRONG_PERMISSION_SCOPE")))]
pub async fn grant(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path((user, permission)): Path<(String, String)>,
    _: Query<NoQuery>,
    JsonValue(_): JsonValue,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let request = pb::ProjectPermissionRef {
        user_id: access.resolve_user(&user)?.to_string(),
        permission_id: permission,
    };
    let out = json!({ "id": request.permission_id, "user_id": request.user_id });
    app.teams
        .clone()
        .grant_project_permission(access.request(request))
        .await?;
    Ok((StatusCode::CREATED, Json(out)))
}

#[utoipa::path(delete, path = "/api/v1/project-permissions/{user_id}/{permission_id}", tag = "permissions",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("permission_id" = String, Path, description = "Permission id")),
    responses((status = 200, description = "success")))]
pub async fn revoke(
    State(app): State<AppState>,
    ServerAccess(access): ServerAccess,
    Path((user, permission)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let request = pb::ProjectPermissionRef {
        user_id: access.resolve_user(&user)?.to_string(),
        permission_id: permission,
    };
    app.teams
        .clone()
        .revoke_project_permission(access.request(request))
        .await?;
    Ok(Json(json!({ "success": true })))
}

/// `team` or `project`, from the route.
fn scope_of(path: &str) -> &'static str {
    if path.contains("/team-permission-definitions") {
        "team"
    } else {
        "project"
    }
}

#[utoipa::path(get, path = "/api/v1/team-permission-definitions", tag = "permissions",
    responses((status = 200, description = "Definitions sorted by id (team scope includes the system ids)")))]
pub async fn list_definitions(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    uri: axum::http::Uri,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let list = definitions(&app, &access, scope_of(uri.path())).await?;
    Ok(Json(json!({ "items": list, "is_paginated": false })))
}

/// The definitions of `scope` (`team` or `project`), sorted by id.
pub(crate) async fn definitions(
    app: &AppState,
    access: &Access,
    scope: &str,
) -> ApiResult<Vec<Value>> {
    let request = pb::DefinitionScope {
        scope: scope.into(),
    };
    let list = app
        .teams
        .clone()
        .list_definitions(access.request(request))
        .await?
        .into_inner();
    Ok(super::parsed(&list.items_json))
}

#[utoipa::path(post, path = "/api/v1/team-permission-definitions", tag = "permissions",
    request_body(content = Object, description = "id, description?, contained_permission_ids?"),
    responses((status = 201, description = "The definition")))]
pub async fn create_definition(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    uri: axum::http::Uri,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let def = create_def(&app, &access, scope_of(uri.path()), &body).await?;
    Ok((StatusCode::CREATED, Json(def)))
}

pub(crate) async fn create_def(
    app: &AppState,
    access: &Access,
    scope: &str,
    body: &Value,
) -> ApiResult<Value> {
    let request = pb::DefinitionWrite {
        scope: scope.into(),
        permission_id: String::new(),
        body_json: body.to_string(),
    };
    let def = app
        .teams
        .clone()
        .create_definition(access.request(request))
        .await?
        .into_inner();
    parse(&def.json)
}

#[utoipa::path(patch, path = "/api/v1/team-permission-definitions/{permission_id}", tag = "permissions",
    params(("permission_id" = String, Path, description = "Permission id")),
    request_body(content = Object, description = "id? (rename), description?, contained_permission_ids?"),
    responses((status = 200, description = "The definition")))]
pub async fn update_definition(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    uri: axum::http::Uri,
    Path(id): Path<String>,
    _: Query<NoQuery>,
    JsonValue(body): JsonValue,
) -> ApiResult<Json<Value>> {
    let request = pb::DefinitionWrite {
        scope: scope_of(uri.path()).into(),
        permission_id: id,
        body_json: body.to_string(),
    };
    let def = app
        .teams
        .clone()
        .update_definition(access.request(request))
        .await?
        .into_inner();
    Ok(Json(parse(&def.json)?))
}

#[utoipa::path(delete, path = "/api/v1/team-permission-definitions/{permission_id}", tag = "permissions",
    params(("permission_id" = String, Path, description = "Permission id")), responses((status = 200, description = "success")))]
pub async fn delete_definition(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    uri: axum::http::Uri,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    delete_def(&app, &access, scope_of(uri.path()), id).await?;
    Ok(Json(json!({ "success": true })))
}

pub(crate) async fn delete_def(
    app: &AppState,
    access: &Access,
    scope: &str,
    id: String,
) -> ApiResult<()> {
    let request = pb::DefinitionWrite {
        scope: scope.into(),
        permission_id: id,
        body_json: String::new(),
    };
    app.teams
        .clone()
        .delete_definition(access.request(request))
        .await?;
    Ok(())
}

/// The project-scope definition routes share the handlers above; these annotations only put
/// them in the OpenAPI document under their own paths.
pub mod project_scope {
    #[utoipa::path(get, path = "/api/v1/project-permission-definitions", tag = "permissions",
        responses((status = 200, description = "Project-scope definitions sorted by id")))]
    pub fn list() {}

    #[utoipa::path(post, path = "/api/v1/project-permission-definitions", tag = "permissions",
        request_body(content = Object, description = "id, description?, contained_permission_ids?"),
        responses((status = 201, description = "The definition")))]
    pub fn create() {}

    #[utoipa::path(patch, path = "/api/v1/project-permission-definitions/{permission_id}", tag = "permissions",
        params(("permission_id" = String, Path, description = "Permission id")),
        request_body(content = Object, description = "id? (rename), description?, contained_permission_ids?"),
        responses((status = 200, description = "The definition")))]
    pub fn update() {}

    #[utoipa::path(delete, path = "/api/v1/project-permission-definitions/{permission_id}", tag = "permissions",
        params(("permission_id" = String, Path, description = "Permission id")), responses((status = 200, description = "success")))]
    pub fn delete() {}
}
