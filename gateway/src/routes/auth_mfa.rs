//! The TOTP second factor (10 §3.3).

use axum::extract::State;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use serde::Deserialize;
use serde_json::Value;

use super::auth_otp::sign_in_result;
use super::auth_password::check_code;
use crate::access::AnyAccess;
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MfaSignIn {
    #[serde(rename = "type")]
    kind: String,
    totp: String,
    code: String,
}

#[utoipa::path(post, path = "/api/v1/auth/mfa/sign-in", tag = "mfa",
    request_body(content = Object, description = "type: \"totp\", totp: the six digits, code: the attempt code from MULTI_FACTOR_AUTHENTICATION_REQUIRED"),
    responses((status = 200, description = "refresh_token, access_token, is_new_user, user_id"),
        (status = 400, description = "INVALID_TOTP_CODE (the attempt code stays usable)")))]
pub async fn sign_in(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<MfaSignIn>,
) -> ApiResult<Json<Value>> {
    if body.kind != "totp" {
        return Err(ApiError::schema("type must be \"totp\""));
    }
    check_code(&body.code)?;
    let request = pb::MfaSignInRequest {
        code: body.code,
        totp: body.totp,
    };
    Ok(sign_in_result(
        app.users
            .clone()
            .mfa_sign_in(access.request(request))
            .await?
            .into_inner(),
    ))
}
