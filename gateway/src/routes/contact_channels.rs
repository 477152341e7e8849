//! Contact channels and e-mail verification (40).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::contacts::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers::AccessType;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth_password::check_code;
use crate::access::{Access, AnyAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

fn channel_json(c: &pb::Channel) -> Value {
    json!({
        "id": c.id,
        "user_id": c.user_id,
        "type": c.r#type,
        "value": c.value,
        "used_for_auth": c.used_for_auth,
        "is_verified": c.is_verified,
        "is_primary": c.is_primary,
    })
}

fn success() -> Json<Value> {
    Json(json!({ "success": true }))
}

/// Clients may not set verification themselves (40 §1).
fn refuse_client_verification(access: &Access, is_verified: Option<bool>) -> ApiResult<()> {
    if access.access_type == AccessType::Client && is_verified.is_some() {
        return Err(ApiError::schema(
            "body contains unknown properties: is_verified",
        ));
    }
    Ok(())
}

fn email_type(t: Option<&str>) -> ApiResult<()> {
    match t {
        None | Some("email") => Ok(()),
        Some(other) => Err(ApiError::schema(format!(
            "type must be \"email\", not {other}"
        ))),
    }
}

/// A path channel id that is not a UUID names no channel.
fn channel_id(text: &str) -> ApiResult<String> {
    uuid::Uuid::parse_str(text)
        .map(|u| u.to_string())
        .map_err(|_| {
            ApiError::new(
                ErrorCode::ContactChannelNotFound,
                "No such contact channel.",
            )
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    user_id: Option<String>,
    contact_channel_id: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/contact-channels", tag = "contact channels",
    params(("user_id" = Option<String>, Query, description = "UUID or `me`; required for clients"),
           ("contact_channel_id" = Option<String>, Query, description = "only this channel")),
    responses((status = 200, description = "Channels, oldest first")))]
pub async fn list(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let users = match q.user_id.as_deref() {
        Some(u) => vec![access.resolve_user(u)?.to_string()],
        None if access.access_type == AccessType::Client => {
            access.user_id().ok_or_else(|| {
                ApiError::new(ErrorCode::CannotGetOwnUserWithoutUser, "Sign in first.")
            })?;
            return Err(ApiError::new(
                ErrorCode::ClientAccessOwnUserOnly,
                "Clients must pass user_id=me.",
            ));
        }
        None => Vec::new(),
    };
    if q.contact_channel_id
        .as_deref()
        .is_some_and(|c| uuid::Uuid::parse_str(c).is_err())
    {
        return Err(ApiError::schema("contact_channel_id must be a UUID"));
    }
    let request = pb::ListChannelsRequest {
        user_ids: users,
        contact_channel_id: q.contact_channel_id,
    };
    let list = app
        .contacts
        .clone()
        .list_channels(access.request(request))
        .await?
        .into_inner();
    let items: Vec<Value> = list.items.iter().map(channel_json).collect();
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Create {
    user_id: String,
    #[serde(rename = "type")]
    kind: String,
    value: String,
    used_for_auth: bool,
    is_verified: Option<bool>,
    is_primary: Option<bool>,
}

#[utoipa::path(post, path = "/api/v1/contact-channels", tag = "contact channels",
    request_body(content = Object, description = "user_id, type (\"email\"), value, used_for_auth, is_verified? (servers), is_primary?"),
    responses((status = 201, description = "The channel"), (status = 409, description = "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE")))]
pub async fn create(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Create>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    refuse_client_verification(&access, body.is_verified)?;
    email_type(Some(&body.kind))?;
    let user = access.resolve_user(&body.user_id)?;
    let request = pb::CreateChannelRequest {
        id: uuid::Uuid::now_v7().to_string(),
        user_id: user.to_string(),
        value: body.value,
        used_for_auth: body.used_for_auth,
        is_verified: body.is_verified.unwrap_or(false),
        is_primary: body.is_primary.unwrap_or(false),
        check_user: true,
    };
    let channel = app
        .contacts
        .clone()
        .create_channel(access.request(request))
        .await?
        .into_inner();
    Ok((StatusCode::CREATED, Json(channel_json(&channel))))
}

#[utoipa::path(get, path = "/api/v1/contact-channels/{user_id}/{contact_channel_id}", tag = "contact channels",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("contact_channel_id" = String, Path, description = "Channel id")),
    responses((status = 200, description = "The channel"), (status = 404, description = "CONTACT_CHANNEL_NOT_FOUND")))]
pub async fn get(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, id)): Path<(String, String)>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let key = pb::ChannelKey {
        user_id: access.resolve_user(&user_id)?.to_string(),
        id: channel_id(&id)?,
    };
    let channel = app
        .contacts
        .clone()
        .get_channel(access.request(key))
        .await?
        .into_inner();
    Ok(Json(channel_json(&channel)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    #[serde(rename = "type")]
    kind: Option<String>,
    value: Option<String>,
    used_for_auth: Option<bool>,
    is_verified: Option<bool>,
    is_primary: Option<bool>,
}

#[utoipa::path(patch, path = "/api/v1/contact-channels/{user_id}/{contact_channel_id}", tag = "contact channels",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("contact_channel_id" = String, Path, description = "Channel id")),
    request_body(content = Object, description = "type?, value?, used_for_auth?, is_verified? (servers), is_primary?"),
    responses((status = 200, description = "The channel")))]
pub async fn update(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, id)): Path<(String, String)>,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Update>,
) -> ApiResult<Json<Value>> {
    refuse_client_verification(&access, body.is_verified)?;
    email_type(body.kind.as_deref())?;
    let request = pb::UpdateChannelRequest {
        user_id: access.resolve_user(&user_id)?.to_string(),
        id: channel_id(&id)?,
        value: body.value,
        used_for_auth: body.used_for_auth,
        is_verified: body.is_verified,
        is_primary: body.is_primary,
    };
    let channel = app
        .contacts
        .clone()
        .update_channel(access.request(request))
        .await?
        .into_inner();
    Ok(Json(channel_json(&channel)))
}

#[utoipa::path(delete, path = "/api/v1/contact-channels/{user_id}/{contact_channel_id}", tag = "contact channels",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("contact_channel_id" = String, Path, description = "Channel id")),
    responses((status = 200, description = "success")))]
pub async fn delete(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let key = pb::ChannelKey {
        user_id: access.resolve_user(&user_id)?.to_string(),
        id: channel_id(&id)?,
    };
    app.contacts
        .clone()
        .delete_user_channel(access.request(key))
        .await?;
    Ok(success())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendCode {
    callback_url: String,
}

#[utoipa::path(post, path = "/api/v1/contact-channels/{user_id}/{contact_channel_id}/send-verification-code", tag = "contact channels",
    params(("user_id" = String, Path, description = "UUID or `me`"), ("contact_channel_id" = String, Path, description = "Channel id")),
    request_body(content = Object, description = "callback_url"),
    responses((status = 200, description = "success"), (status = 409, description = "EMAIL_ALREADY_VERIFIED")))]
pub async fn send_code(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    Path((user_id, id)): Path<(String, String)>,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<SendCode>,
) -> ApiResult<Json<Value>> {
    let request = pb::RequestVerificationRequest {
        user_id: access.resolve_user(&user_id)?.to_string(),
        target: Some(pb::request_verification_request::Target::ChannelId(
            channel_id(&id)?,
        )),
        callback_url: body.callback_url,
    };
    app.contacts
        .clone()
        .request_verification(access.request(request))
        .await?;
    Ok(success())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendCodeLegacy {
    email: String,
    callback_url: String,
}

#[utoipa::path(post, path = "/api/v1/contact-channels/send-verification-code", tag = "contact channels",
    request_body(content = Object, description = "email (the signed-in user's primary e-mail), callback_url"),
    responses((status = 200, description = "success"), (status = 400, description = "EMAIL_IS_NOT_PRIMARY_EMAIL")))]
pub async fn send_code_legacy(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<SendCodeLegacy>,
) -> ApiResult<Json<Value>> {
    let user = access.require_user()?;
    if !latchkey_shared::email::is_strict(&body.email) {
        return Err(ApiError::schema("email must be a valid e-mail address"));
    }
    let request = pb::RequestVerificationRequest {
        user_id: user.to_string(),
        target: Some(pb::request_verification_request::Target::Email(body.email)),
        callback_url: body.callback_url,
    };
    app.contacts
        .clone()
        .request_verification(access.request(request))
        .await?;
    Ok(success())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Code {
    code: String,
}

#[utoipa::path(post, path = "/api/v1/contact-channels/verify", tag = "contact channels",
    request_body(content = Object, description = "code"), responses((status = 200, description = "success")))]
pub async fn verify(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Code>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    app.contacts
        .clone()
        .verify(access.request(pb::VerificationCode { code: body.code }))
        .await?;
    Ok(success())
}

#[utoipa::path(post, path = "/api/v1/contact-channels/verify/check-code", tag = "contact channels",
    request_body(content = Object, description = "code"), responses((status = 200, description = "is_code_valid: true")))]
pub async fn check_verification_code(
    State(app): State<AppState>,
    AnyAccess(access): AnyAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Code>,
) -> ApiResult<Json<Value>> {
    check_code(&body.code)?;
    app.contacts
        .clone()
        .check_verification_code(access.request(pb::VerificationCode { code: body.code }))
        .await?;
    Ok(Json(json!({ "is_code_valid": true })))
}
