//! One-time-code and magic-link sign-in (10 §2).

use axum::extract::State;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth_password::check_code;
use crate::access::AnyAccess;
use crate::error::ApiResult;
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

/// The sign-in result of 10 §0.
pub fn sign_in_result(r: pb::SignInResult) -> Json<Value> {
    Json(json!({
        "refresh_token": r.refresh_token,
        "access_token": r.access_token,
        "is_new_user": r.is_new_user,
        "user_id": r.user_id,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendCode {
    email: String,
    callback_url: String,
}

#[utoipa::path(post, path = "/api/v1/auth/otp/send-sign-in-code", tag = "otp",
    request_body(content = Object, description = "email, callback_url (the magic link is callback_url?code=…)"),
    responses((status = 200, description = "nonce: the 39 characters to send back after the 6-character code"),
        (status = 403, description = "OTP_SIGN_IN_NOT_ENABLED"), (status = 409, description = "USER_EMAIL_ALREADY_EXISTS (address not verified)")))]
pub async fn send_code(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<SendCode>,
) -> ApiResult<Json<Value>> {
    let request = pb::SendSignInCodeRequest {
        email: body.email,
        callback_url: body.callback_url,
    };
    let sent = app
        .users
        .clone()
        .send_sign_in_code(access.request(request))
        .await?
        .into_inner();
    Ok(Json(json!({ "nonce": sent.nonce })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Code {
    code: String,
}

#[utoipa::path(post, path = "/api/v1/auth/otp/sign-in", tag = "otp",
    request_body(content = Object, description = "code: the magic link's 45 characters, or the 6-character code followed by the nonce"),
    responses((status = 200, description = "refresh_token, access_token, is_new_user, user_id"),
        (status = 400, description = "MULTI_FACTOR_AUTHENTICATION_REQUIRED with details.attempt_code")))]
pub async fn sign_in(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Code>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    let request = pb::CodeRequest { code: body.code };
    Ok(sign_in_result(
        app.users
            .clone()
            .otp_sign_in(access.request(request))
            .await?
            .into_inner(),
    ))
}

#[utoipa::path(post, path = "/api/v1/auth/otp/sign-in/check-code", tag = "otp",
    request_body(content = Object, description = "code"),
    responses((status = 200, description = "is_code_valid: true (the code is not consumed)")))]
pub async fn check(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Code>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    app.users
        .clone()
        .check_sign_in_code(access.request(pb::CodeRequest { code: body.code }))
        .await?;
    Ok(Json(json!({ "is_code_valid": true })))
}
