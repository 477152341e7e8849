//! `GET /projects/current` (50 §5) and the public JWKS route (70 §1.3).

use axum::extract::{Path, State};
use axum::http::header::CACHE_CONTROL;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::Json;
use latchkey_proto::auth::v1::{Empty, GetJwksRequest};
use latchkey_shared::error::ErrorCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::AnyAccess;
use crate::error::{ApiError, ApiResult};
use crate::extract::{NoQuery, Query};
use crate::state::AppState;

#[utoipa::path(get, path = "/api/v1/projects/current", tag = "projects",
    responses((status = 200, description = "The project of the request and its public configuration")))]
pub async fn current(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let project = app
        .auth
        .clone()
        .get_current_project(access.request(Empty {}))
        .await?
        .into_inner();
    let config: Value = serde_json::from_str(&project.config_json)
        .map_err(|_| ApiError::new(ErrorCode::InternalServerError, "Bad project configuration."))?;
    Ok(Json(
        json!({ "id": project.id, "display_name": project.display_name, "config": config }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwksQuery {
    include_restricted: Option<bool>,
    include_anonymous: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/projects/{project_id}/.well-known/jwks.json", tag = "projects",
    params(("project_id" = String, Path, description = "Project id"),
           ("include_restricted" = Option<bool>, Query, description = "Also list restricted-audience keys"),
           ("include_anonymous" = Option<bool>, Query, description = "Also list anonymous users' keys; implies include_restricted")),
    responses((status = 200, description = "JSON Web Key Set"), (status = 404, description = "PROJECT_NOT_FOUND")))]
pub async fn jwks(
    State(app): State<AppState>,
    Path(project_id): Path<String>,
    Query(query): Query<JwksQuery>,
) -> ApiResult<Response> {
    let include_anonymous = query.include_anonymous.unwrap_or(false);
    let include_restricted = query.include_restricted.unwrap_or(false) || include_anonymous;
    let not_found = || {
        ApiError::new(ErrorCode::ProjectNotFound, "The project does not exist.")
            .with_details(json!({ "project_id": project_id }))
    };
    let id = uuid::Uuid::parse_str(&project_id).map_err(|_| not_found())?;
    let mut request = tonic::Request::new(GetJwksRequest {
        project_id: id.to_string(),
        include_restricted,
        include_anonymous,
    });
    request.set_timeout(latchkey_shared::grpc::DEFAULT_DEADLINE);
    let keys = app.auth.clone().get_jwks(request).await?.into_inner().keys;
    let keys: Vec<Value> = keys
        .into_iter()
        .map(|k| json!({ "kty": "EC", "alg": "ES256", "crv": "P-256", "use": "sig", "kid": k.kid, "x": k.x, "y": k.y }))
        .collect();
    let mut response = Json(json!({ "keys": keys })).into_response();
    response.headers_mut().insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    Ok(response)
}
