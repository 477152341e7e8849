//! CLI sign-in (Stack Auth's `/auth/cli`, README "CLI sign-in"): start, poll, complete.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::AnyAccess;
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, OptionalJson, Query};
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    /// A JavaScript number, as the SDK sends it; whole milliseconds count.
    expires_in_millis: Option<f64>,
}

#[utoipa::path(post, path = "/api/v1/auth/cli", tag = "cli",
    request_body(content = Object, description = "optional: expires_in_millis (1 to 86400000; default 7200000, two hours). The body may be absent."),
    responses((status = 200, description = "polling_code (kept by the CLI), login_code (for the browser page), expires_at (ISO 8601)"),
        (status = 400, description = "SCHEMA_ERROR")))]
pub async fn start(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    OptionalJson(body): OptionalJson<Start>,
) -> ApiResult<Json<Value>> {
    let expires_in_millis = match body.expires_in_millis {
        Some(ms) if !ms.is_finite() => {
            return Err(ApiError::schema("expires_in_millis must be a number"))
        }
        // Saturating: an enormous value stays enormous and is refused by the service's bound.
        Some(ms) => Some(ms.floor() as i64),
        None => None,
    };
    let request = pb::StartCliLoginRequest { expires_in_millis };
    let started = app
        .users
        .clone()
        .start_cli_login(access.request(request))
        .await?
        .into_inner();
    Ok(Json(json!({
        "polling_code": started.polling_code,
        "login_code": started.login_code,
        "expires_at": latchkey_shared::clock::iso8601_millis(started.expires_at_millis),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Poll {
    polling_code: String,
}

#[utoipa::path(post, path = "/api/v1/auth/cli/poll", tag = "cli",
    request_body(content = Object, description = "polling_code"),
    responses((status = 200, description = "status: waiting, expired or used"),
        (status = 201, description = "status: success, refresh_token: the CLI's own new session (answered once)"),
        (status = 400, description = "INVALID_POLLING_CODE")))]
pub async fn poll(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Poll>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let request = pb::PollCliLoginRequest {
        polling_code: body.polling_code,
    };
    let polled = app
        .users
        .clone()
        .poll_cli_login(access.request(request))
        .await?
        .into_inner();
    Ok(if polled.status == "success" {
        (
            StatusCode::CREATED,
            Json(json!({ "status": "success", "refresh_token": polled.refresh_token })),
        )
    } else {
        (StatusCode::OK, Json(json!({ "status": polled.status })))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Complete {
    login_code: String,
    mode: Option<String>,
    refresh_token: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/auth/cli/complete", tag = "cli",
    request_body(content = Object, description = "login_code; mode: complete (default) with refresh_token, a session of the user signing the CLI in, or check"),
    responses((status = 200, description = "complete: success: true; check: cli_session_state: none"),
        (status = 400, description = "INVALID_LOGIN_CODE (unknown, expired, completed or used), SCHEMA_ERROR"),
        (status = 401, description = "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED")))]
pub async fn complete(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Complete>,
) -> ApiResult<Json<Value>> {
    let mut users = app.users.clone();
    match body.mode.as_deref().unwrap_or("complete") {
        "complete" => {
            let refresh_token = body.refresh_token.ok_or_else(|| {
                ApiError::schema("refresh_token is required when mode is 'complete'")
            })?;
            let request = pb::CompleteCliLoginRequest {
                login_code: body.login_code,
                refresh_token,
            };
            users.complete_cli_login(access.request(request)).await?;
            Ok(Json(json!({ "success": true })))
        }
        "check" => {
            let request = pb::CheckCliLoginRequest {
                login_code: body.login_code,
            };
            users.check_cli_login(access.request(request)).await?;
            // Latchkey keeps no anonymous CLI sessions, so there is never one to claim.
            Ok(Json(json!({ "cli_session_state": "none" })))
        }
        _ => Err(ApiError::schema("mode must be 'complete' or 'check'")),
    }
}
