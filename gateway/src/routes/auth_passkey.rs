//! Passkeys (Stack Auth's `/auth/passkey/*`, README "Passkeys"): registration and sign-in
//! ceremonies, and a user's passkeys.

use axum::extract::{Path, State};
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth_anonymous::Nothing;
use super::auth_password::token_triple;
use crate::access::AnyAccess;
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, OptionalJson, Query};
use crate::state::AppState;

fn challenge(c: pb::PasskeyChallenge) -> ApiResult<Json<Value>> {
    let options: Value = serde_json::from_str(&c.options_json).map_err(|_| {
        ApiError::new(
            latchkey_shared::error::ErrorCode::InternalServerError,
            "The auth service answered unreadable options.",
        )
    })?;
    Ok(Json(json!({ "options_json": options, "code": c.code })))
}

#[utoipa::path(post, path = "/api/v1/auth/passkey/initiate-passkey-registration", tag = "passkeys",
    request_body(content = Object, description = "none (an empty object or no body); a signed-in user"),
    responses((status = 200, description = "options_json (PublicKeyCredentialCreationOptionsJSON with rp.id THIS_VALUE_WILL_BE_REPLACED.example.com, for the page to set to its host), code (single use, 65 s)"),
        (status = 400, description = "PASSKEY_AUTHENTICATION_NOT_ENABLED, PASSKEY_REGISTRATION_FAILED (20 passkeys already), SCHEMA_ERROR (no signed-in user)"),
        (status = 401, description = "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED")))]
pub async fn initiate_registration(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    OptionalJson(_): OptionalJson<Nothing>,
) -> ApiResult<Json<Value>> {
    signed_in(&access)?;
    let c = app
        .passkeys
        .clone()
        .initiate_registration(access.request(pb::Empty {}))
        .await?
        .into_inner();
    challenge(c)
}

/// Stack Auth refuses these calls without a user as a schema error.
fn signed_in(access: &crate::access::Access) -> ApiResult<()> {
    access
        .user_id()
        .map(drop)
        .ok_or_else(|| ApiError::schema("a signed-in user (an access token) is required"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    credential: serde_json::Map<String, Value>,
    code: String,
}

#[utoipa::path(post, path = "/api/v1/auth/passkey/register", tag = "passkeys",
    request_body(content = Object, description = "credential (RegistrationResponseJSON from navigator.credentials.create), code"),
    responses((status = 200, description = "user_handle: the new credential's id (base64url)"),
        (status = 400, description = "PASSKEY_REGISTRATION_FAILED (origin not trusted, verification failed, code of another user, already registered), PASSKEY_AUTHENTICATION_NOT_ENABLED, VERIFICATION_CODE_EXPIRED, SCHEMA_ERROR"),
        (status = 404, description = "VERIFICATION_CODE_NOT_FOUND"),
        (status = 409, description = "VERIFICATION_CODE_ALREADY_USED")))]
pub async fn register(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Register>,
) -> ApiResult<Json<Value>> {
    signed_in(&access)?;
    super::auth_password::check_code(&body.code)?;
    let request = pb::RegisterPasskeyRequest {
        credential_json: Value::Object(body.credential).to_string(),
        code: body.code,
    };
    let done = app
        .passkeys
        .clone()
        .register(access.request(request))
        .await?
        .into_inner();
    Ok(Json(json!({ "user_handle": done.credential_id })))
}

#[utoipa::path(post, path = "/api/v1/auth/passkey/initiate-passkey-authentication", tag = "passkeys",
    request_body(content = Object, description = "none (an empty object or no body)"),
    responses((status = 200, description = "options_json (PublicKeyCredentialRequestOptionsJSON, rpId THIS_VALUE_WILL_BE_REPLACED.example.com, no allowCredentials: the authenticator offers its passkeys for the site), code (single use, 65 s)"),
        (status = 400, description = "PASSKEY_AUTHENTICATION_NOT_ENABLED")))]
pub async fn initiate_authentication(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    OptionalJson(_): OptionalJson<Nothing>,
) -> ApiResult<Json<Value>> {
    let c = app
        .passkeys
        .clone()
        .initiate_authentication(access.request(pb::Empty {}))
        .await?
        .into_inner();
    challenge(c)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    authentication_response: serde_json::Map<String, Value>,
    code: String,
}

#[utoipa::path(post, path = "/api/v1/auth/passkey/sign-in", tag = "passkeys",
    request_body(content = Object, description = "authentication_response (AuthenticationResponseJSON from navigator.credentials.get), code"),
    responses((status = 200, description = "access_token, refresh_token, user_id, is_new_user: false"),
        (status = 400, description = "PASSKEY_AUTHENTICATION_FAILED (unknown passkey, origin not trusted, bad signature, counter did not advance), MULTI_FACTOR_AUTHENTICATION_REQUIRED (details.attempt_code), PASSKEY_AUTHENTICATION_NOT_ENABLED, VERIFICATION_CODE_EXPIRED, SCHEMA_ERROR"),
        (status = 404, description = "VERIFICATION_CODE_NOT_FOUND"),
        (status = 409, description = "VERIFICATION_CODE_ALREADY_USED")))]
pub async fn sign_in(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<SignIn>,
) -> ApiResult<Json<Value>> {
    super::auth_password::check_code(&body.code)?;
    let request = pb::PasskeySignInRequest {
        authentication_response_json: Value::Object(body.authentication_response).to_string(),
        code: body.code,
    };
    let r = app
        .passkeys
        .clone()
        .sign_in(access.request(request))
        .await?
        .into_inner();
    let Json(mut triple) = token_triple(r);
    triple["is_new_user"] = json!(false);
    Ok(Json(triple))
}

#[utoipa::path(get, path = "/api/v1/users/{user_id}/passkeys", tag = "passkeys",
    params(("user_id" = String, Path, description = "UUID or `me` (a client only its own user)")),
    responses((status = 200, description = "items: id, credential_id, created_at_millis, last_used_at_millis (oldest first); is_paginated: false"),
        (status = 403, description = "CLIENT_ACCESS_OWN_USER_ONLY"), (status = 404, description = "USER_NOT_FOUND")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path(user_id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let user = access.resolve_user(&user_id)?;
    let request = pb::UserRef {
        user_id: user.to_string(),
    };
    let list = app
        .passkeys
        .clone()
        .list_passkeys(access.request(request))
        .await?
        .into_inner();
    let items: Vec<Value> = list
        .items_json
        .iter()
        .filter_map(|j| serde_json::from_str(j).ok())
        .collect();
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

#[utoipa::path(delete, path = "/api/v1/users/{user_id}/passkeys/{passkey_id}", tag = "passkeys",
    params(("user_id" = String, Path, description = "UUID or `me` (a client only its own user)"),
        ("passkey_id" = String, Path, description = "the passkey's id")),
    responses((status = 200, description = "success: true; the user's passkey_auth_enabled follows"),
        (status = 403, description = "CLIENT_ACCESS_OWN_USER_ONLY"),
        (status = 404, description = "PASSKEY_NOT_FOUND, USER_NOT_FOUND")))]
pub async fn delete(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, passkey_id)): Path<(String, String)>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let user = access.resolve_user(&user_id)?;
    let id = uuid::Uuid::parse_str(&passkey_id).map_err(|_| {
        ApiError::new(
            latchkey_shared::error::ErrorCode::PasskeyNotFound,
            "No such passkey.",
        )
    })?;
    let request = pb::PasskeyRef {
        user_id: user.to_string(),
        id: id.to_string(),
    };
    app.passkeys
        .clone()
        .delete_passkey(access.request(request))
        .await?;
    Ok(Json(json!({ "success": true })))
}
