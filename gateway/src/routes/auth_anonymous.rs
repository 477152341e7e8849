//! Anonymous sign-up (Stack Auth's `/auth/anonymous/sign-up`, README "Anonymous users").

use axum::extract::State;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::AnyAccess;
use crate::error::ApiResult;
use crate::extract::{NoQuery, OptionalJson, Query};
use crate::state::AppState;

/// The route takes no fields; the SDK sends no body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

#[utoipa::path(post, path = "/api/v1/auth/anonymous/sign-up", tag = "anonymous",
    request_body(content = Object, description = "none (an empty object or no body)"),
    responses((status = 200, description = "access_token (audience <project>:anon, is_anonymous: true), refresh_token, user_id")))]
pub async fn sign_up(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    OptionalJson(_): OptionalJson<Nothing>,
) -> ApiResult<Json<Value>> {
    let r = app
        .users
        .clone()
        .anonymous_sign_up(access.request(pb::Empty {}))
        .await?
        .into_inner();
    Ok(Json(json!({
        "access_token": r.access_token,
        "refresh_token": r.refresh_token,
        "user_id": r.user_id,
    })))
}
