//! Admin routes for the project's settings (80 §2) and key sets (80 §3).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::auth::v1::{self as pb, Empty};
use latchkey_shared::error::ErrorCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{Access, AdminAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, JsonValue, NoQuery, Query};
use crate::state::AppState;

fn parse_settings(json: &str) -> ApiResult<Json<Value>> {
    serde_json::from_str(json)
        .map(Json)
        .map_err(|_| ApiError::new(ErrorCode::InternalServerError, "Bad settings document."))
}

#[utoipa::path(get, path = "/api/v1/internal/project", tag = "admin",
    responses((status = 200, description = "Full project settings, secrets omitted")))]
pub async fn get_project(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    settings(&app, &access).await.map(Json)
}

/// The project's settings (admin view); the console reads them the same way.
pub async fn settings(app: &AppState, access: &Access) -> ApiResult<Value> {
    let settings = app
        .auth
        .clone()
        .get_settings(access.request(Empty {}))
        .await?
        .into_inner();
    parse_settings(&settings.json).map(|Json(v)| v)
}

/// Applies a partial settings document, and tells the rate limiter the settings moved.
pub async fn change_settings(app: &AppState, access: &Access, patch: &Value) -> ApiResult<Value> {
    let request = access.request(pb::UpdateSettingsRequest {
        patch_json: patch.to_string(),
    });
    let settings = app
        .auth
        .clone()
        .update_settings(request)
        .await?
        .into_inner();
    app.limits
        .settings_changed(access.project_id, settings.version)
        .await;
    parse_settings(&settings.json).map(|Json(v)| v)
}

#[utoipa::path(patch, path = "/api/v1/internal/project", tag = "admin",
    request_body(content = Object, description = "Any subset of the settings. `rate_limits` maps a bucket (client_general, server_general, client_auth_sensitive, email_sending, unauthenticated, password_guesses_per_email_and_ip, password_guesses_per_email) to {limit, window_seconds}, or to null to switch it off"),
    responses((status = 200, description = "Full settings after the change"), (status = 400, description = "SCHEMA_ERROR")))]
pub async fn update_project(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
    JsonValue(patch): JsonValue,
) -> ApiResult<Json<Value>> {
    change_settings(&app, &access, &patch).await.map(Json)
}

fn key_set_json(key: &pb::ApiKey) -> Value {
    let tail = |t: &Option<pb::KeyTail>| t.as_ref().map(|t| json!({ "last_four": t.last_four }));
    json!({
        "id": key.id,
        "description": key.description,
        "created_at_millis": key.created_at_millis,
        "expires_at_millis": key.expires_at_millis,
        "revoked": key.revoked,
        "publishable_client_key": tail(&key.publishable_client_key),
        "secret_server_key": tail(&key.secret_server_key),
        "super_secret_admin_key": tail(&key.super_secret_admin_key),
    })
}

#[utoipa::path(post, path = "/api/v1/internal/signing-keys/rotate", tag = "admin",
    responses((status = 200, description = "A new ES256 key per audience now signs new access tokens; the replaced keys stay in the JWKS until every token they signed has expired (access-token lifetime plus a minute). Answers the published keys, newest first: {items: [{kid, audience, created_at_millis}]}")))]
pub async fn rotate_signing_keys(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let keys = app
        .auth
        .clone()
        .rotate_signing_keys(access.request(Empty {}))
        .await?
        .into_inner()
        .keys;
    let items: Vec<Value> = keys
        .iter()
        .map(|k| json!({ "kid": k.kid, "audience": k.audience, "created_at_millis": k.created_at_millis }))
        .collect();
    Ok(Json(json!({ "items": items })))
}

#[utoipa::path(get, path = "/api/v1/internal/api-keys", tag = "admin",
    responses((status = 200, description = "Key sets of the project (last four characters only)")))]
pub async fn list_api_keys(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let items = key_sets(&app, &access).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

/// The project's key sets as the API shows them (last four characters only).
pub async fn key_sets(app: &AppState, access: &Access) -> ApiResult<Vec<Value>> {
    let list = app
        .auth
        .clone()
        .list_api_keys(access.request(Empty {}))
        .await?
        .into_inner();
    Ok(list.items.iter().map(key_set_json).collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    pub description: String,
    pub expires_at_millis: Option<i64>,
    pub has_publishable_client_key: bool,
    pub has_secret_server_key: bool,
    pub has_super_secret_admin_key: bool,
}

#[utoipa::path(post, path = "/api/v1/internal/api-keys", tag = "admin",
    request_body(content = Object, description = "description, expires_at_millis?, has_publishable_client_key, has_secret_server_key, has_super_secret_admin_key"),
    responses((status = 201, description = "The new key set with its full keys, shown once")))]
pub async fn create_api_key(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<CreateApiKey>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    Ok((
        StatusCode::CREATED,
        Json(create_key_set(&app, &access, body).await?),
    ))
}

/// A new key set with its whole keys, shown this once.
pub async fn create_key_set(
    app: &AppState,
    access: &Access,
    body: CreateApiKey,
) -> ApiResult<Value> {
    let request = access.request(pb::CreateApiKeyRequest {
        description: body.description,
        expires_at_millis: body.expires_at_millis,
        has_publishable_client_key: body.has_publishable_client_key,
        has_secret_server_key: body.has_secret_server_key,
        has_super_secret_admin_key: body.has_super_secret_admin_key,
    });
    let created = app.auth.clone().create_api_key(request).await?.into_inner();
    let mut out = created
        .key
        .as_ref()
        .map(key_set_json)
        .unwrap_or_else(|| json!({}));
    out["publishable_client_key"] = json!(created.publishable_client_key);
    out["secret_server_key"] = json!(created.secret_server_key);
    out["super_secret_admin_key"] = json!(created.super_secret_admin_key);
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateApiKey {
    description: Option<String>,
    revoked: Option<bool>,
}

#[utoipa::path(patch, path = "/api/v1/internal/api-keys/{api_key_id}", tag = "admin",
    params(("api_key_id" = String, Path, description = "Key set id")),
    request_body(content = Object, description = "description?, revoked? (true only)"),
    responses((status = 200, description = "The key set"), (status = 404, description = "API_KEY_NOT_FOUND")))]
pub async fn update_api_key(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    Path(api_key_id): Path<String>,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<UpdateApiKey>,
) -> ApiResult<Json<Value>> {
    if body.revoked == Some(false) {
        return Err(ApiError::schema("revoked can only be set to true."));
    }
    if uuid::Uuid::parse_str(&api_key_id).is_err() {
        return Err(ApiError::new(ErrorCode::ApiKeyNotFound, "No such key set.")
            .with_details(json!({ "api_key_id": api_key_id })));
    }
    update_key_set(&app, &access, api_key_id, body.description, body.revoked)
        .await
        .map(Json)
}

/// Describes or revokes a key set.
pub async fn update_key_set(
    app: &AppState,
    access: &Access,
    id: String,
    description: Option<String>,
    revoked: Option<bool>,
) -> ApiResult<Value> {
    let request = access.request(pb::UpdateApiKeyRequest {
        id,
        description,
        revoked,
    });
    let key = app.auth.clone().update_api_key(request).await?.into_inner();
    Ok(key_set_json(&key))
}

#[utoipa::path(get, path = "/api/v1/internal/emails", tag = "admin",
    responses((status = 200, description = "Mail sent for the project, newest first; bodies only in dev-mailbox mode")))]
pub async fn list_emails(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let items = emails(&app, &access).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

/// Mail sent for the project, newest first.
pub async fn emails(app: &AppState, access: &Access) -> ApiResult<Vec<Value>> {
    let list = app
        .contacts
        .clone()
        .list_emails(access.request(latchkey_proto::contacts::v1::Empty {}))
        .await?
        .into_inner();
    Ok(list
        .items
        .into_iter()
        .map(|e| {
            let mut item = json!({
                "id": e.id, "to": e.to, "subject": e.subject, "template": e.template,
                "status": e.status, "error": e.error, "created_at_millis": e.created_at_millis,
            });
            if let (Some(text), Some(html)) = (e.text, e.html) {
                item["text"] = json!(text);
                item["html"] = json!(html);
            }
            item
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestEmail {
    pub recipient_email: String,
}

#[utoipa::path(post, path = "/api/v1/internal/send-test-email", tag = "admin",
    request_body(content = Object, description = "recipient_email"),
    responses((status = 200, description = "{success, error_message}: the mail server's answer to a test message sent with the project's mail settings; the message is in the mail log either way")))]
pub async fn send_test_email(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<TestEmail>,
) -> ApiResult<Json<Value>> {
    test_email(&app, &access, body.recipient_email)
        .await
        .map(Json)
}

/// Sends a test message and waits for the mail server's answer.
pub async fn test_email(app: &AppState, access: &Access, to: String) -> ApiResult<Value> {
    let request = latchkey_proto::contacts::v1::SendTestEmailRequest { to };
    let result = app
        .contacts
        .clone()
        .send_test_email(access.request(request))
        .await?
        .into_inner();
    Ok(json!({ "success": result.success, "error_message": result.error_message }))
}
