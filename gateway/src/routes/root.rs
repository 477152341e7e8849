//! `GET /api/v1/` (00 §6): a welcome and what the credentials sent amount to.

use axum::Json;
use serde_json::{json, Value};

use crate::access::MaybeAccess;
use crate::error::ApiResult;
use crate::extract::{NoQuery, Query};

#[utoipa::path(get, path = "/api/v1/", tag = "root",
    responses((status = 200, description = "Welcome; `authentication` describes the credentials sent, or null")))]
pub async fn root(MaybeAccess(access): MaybeAccess, _: Query<NoQuery>) -> ApiResult<Json<Value>> {
    let authentication = access.map(|a| {
        json!({
            "access_type": a.access_type.as_str(),
            "project_id": a.project_id,
            "user_id": a.user.map(|u| u.user_id),
        })
    });
    Ok(Json(json!({
        "message": "Welcome to the Latchkey API. The OpenAPI document is at /api/v1/openapi.json.",
        "authentication": authentication,
    })))
}
