//! Password sign-up, sign-in, change, set and reset (10 §1).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::headers;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::AnyAccess;
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

/// The token triple of 10 §0.
pub fn token_triple(r: pb::SignInResult) -> Json<Value> {
    Json(
        json!({ "access_token": r.access_token, "refresh_token": r.refresh_token, "user_id": r.user_id }),
    )
}

/// Codes are exactly 45 characters (70 §4).
pub fn check_code(code: &str) -> Result<(), ApiError> {
    if code.chars().count() == latchkey_shared::codes::CODE_LEN {
        Ok(())
    } else {
        Err(ApiError::schema("code must be exactly 45 characters"))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignUp {
    email: String,
    password: String,
    verification_callback_url: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/auth/password/sign-up", tag = "password",
    request_body(content = Object, description = "email, password, verification_callback_url?"),
    responses((status = 200, description = "access_token, refresh_token, user_id"), (status = 409, description = "USER_EMAIL_ALREADY_EXISTS")))]
pub async fn sign_up(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<SignUp>,
) -> ApiResult<Json<Value>> {
    let request = pb::SignUpRequest {
        email: body.email,
        password: body.password,
        verification_callback_url: body.verification_callback_url,
    };
    Ok(token_triple(
        app.users
            .clone()
            .sign_up(access.request(request))
            .await?
            .into_inner(),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    email: String,
    password: String,
}

#[utoipa::path(post, path = "/api/v1/auth/password/sign-in", tag = "password",
    request_body(content = Object, description = "email, password"),
    responses((status = 200, description = "access_token, refresh_token, user_id"), (status = 400, description = "EMAIL_PASSWORD_MISMATCH"), (status = 429, description = "RATE_LIMITED: too many wrong passwords for this email (rate-limit buckets password_guesses_per_email_and_ip, password_guesses_per_email); only wrong passwords count, a correct one clears the count for this client")))]
pub async fn sign_in(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<SignIn>,
) -> ApiResult<Json<Value>> {
    let request = pb::SignInRequest {
        email: body.email,
        password: body.password,
    };
    Ok(token_triple(
        app.users
            .clone()
            .sign_in(access.request(request))
            .await?
            .into_inner(),
    ))
}

fn success() -> Json<Value> {
    Json(json!({ "success": true }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    old_password: String,
    new_password: String,
}

#[utoipa::path(post, path = "/api/v1/auth/password/update", tag = "password",
    request_body(content = Object, description = "old_password, new_password; X-Service-Refresh-Token keeps that session"),
    responses((status = 200, description = "success; other sessions ended")))]
pub async fn update(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    request_headers: HeaderMap,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Update>,
) -> ApiResult<Json<Value>> {
    access.require_user()?;
    let refresh_token = headers::read(&request_headers, headers::REFRESH_TOKEN)
        .ok()
        .flatten()
        .map(str::to_owned);
    let request = pb::UpdatePasswordRequest {
        old_password: body.old_password,
        new_password: body.new_password,
        refresh_token,
    };
    app.users
        .clone()
        .update_password(access.request(request))
        .await?;
    Ok(success())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Set {
    password: String,
}

#[utoipa::path(post, path = "/api/v1/auth/password/set", tag = "password",
    request_body(content = Object, description = "password"),
    responses((status = 200, description = "success"), (status = 400, description = "PASSWORD_ALREADY_SET")))]
pub async fn set(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Set>,
) -> ApiResult<Json<Value>> {
    access.require_user()?;
    app.users
        .clone()
        .set_password(access.request(pb::SetPasswordRequest {
            password: body.password,
        }))
        .await?;
    Ok(success())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendResetCode {
    email: String,
    callback_url: String,
}

#[utoipa::path(post, path = "/api/v1/auth/password/send-reset-code", tag = "password",
    request_body(content = Object, description = "email, callback_url"),
    responses((status = 200, description = "The same answer whether or not the address exists")))]
pub async fn send_reset_code(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<SendResetCode>,
) -> ApiResult<Json<Value>> {
    let request = pb::SendResetCodeRequest {
        email: body.email,
        callback_url: body.callback_url,
    };
    app.users
        .clone()
        .send_reset_code(access.request(request))
        .await?;
    Ok(Json(
        json!({ "success": "maybe, only if user with e-mail exists" }),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reset {
    code: String,
    password: String,
}

#[utoipa::path(post, path = "/api/v1/auth/password/reset", tag = "password",
    request_body(content = Object, description = "code, password"),
    responses((status = 200, description = "success; every session ended")))]
pub async fn reset(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Reset>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    let request = pb::ResetPasswordRequest {
        code: body.code,
        password: body.password,
    };
    app.users
        .clone()
        .reset_password(access.request(request))
        .await?;
    Ok(success())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckCode {
    code: String,
}

#[utoipa::path(post, path = "/api/v1/auth/password/reset/check-code", tag = "password",
    request_body(content = Object, description = "code"),
    responses((status = 200, description = "is_code_valid: true (never false; invalid codes are errors)")))]
pub async fn check_reset_code(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<CheckCode>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    app.users
        .clone()
        .check_reset_code(access.request(pb::CodeRequest { code: body.code }))
        .await?;
    Ok(Json(json!({ "is_code_valid": true })))
}
