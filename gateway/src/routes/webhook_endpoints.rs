//! Webhook endpoints and their deliveries, for admins (80 §7).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use latchkey_proto::webhooks::v1 as pb;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{Access, AdminAccess};
use crate::error::{ApiError, ApiResult};
use crate::extract::{self, NoQuery, Query};
use crate::state::AppState;

fn parse(text: &str) -> ApiResult<Value> {
    serde_json::from_str(text)
        .map_err(|_| ApiError::schema("malformed answer from the webhooks service"))
}

fn page(items: &[String], next_cursor: Option<String>) -> ApiResult<Json<Value>> {
    let items = items
        .iter()
        .map(|t| parse(t))
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(Json(json!({
        "items": items,
        "is_paginated": true,
        "pagination": { "next_cursor": next_cursor },
    })))
}

fn endpoint_ref(id: String) -> pb::EndpointRef {
    pb::EndpointRef { endpoint_id: id }
}

#[utoipa::path(get, path = "/api/v1/webhook-endpoints", tag = "webhooks",
    responses((status = 200, description = "Endpoints (secrets omitted)")))]
pub async fn list(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    let items = endpoints(&app, &access).await?;
    Ok(Json(json!({ "items": items, "is_paginated": false })))
}

pub(crate) async fn endpoints(app: &AppState, access: &Access) -> ApiResult<Vec<Value>> {
    let list = app
        .webhooks
        .clone()
        .list_endpoints(access.request(pb::Empty {}))
        .await?
        .into_inner();
    list.items_json.iter().map(|t| parse(t)).collect()
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints", tag = "webhooks",
    request_body(content = Object, description = "url, event_types?, description?"),
    responses((status = 201, description = "The endpoint with its whsec_ secret (shown once)"),
        (status = 400, description = "WEBHOOK_URL_NOT_ALLOWED")))]
pub async fn create(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Value>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let created = create_endpoint(&app, &access, &body).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// A new endpoint, with its `whsec_` secret shown this once.
pub(crate) async fn create_endpoint(
    app: &AppState,
    access: &Access,
    body: &Value,
) -> ApiResult<Value> {
    let request = pb::EndpointWrite {
        endpoint_id: String::new(),
        body_json: body.to_string(),
    };
    let created = app
        .webhooks
        .clone()
        .create_endpoint(access.request(request))
        .await?
        .into_inner();
    parse(&created.json)
}

#[utoipa::path(patch, path = "/api/v1/webhook-endpoints/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "endpoint id")),
    request_body(content = Object, description = "url?, event_types?, enabled?, description?"),
    responses((status = 200, description = "The endpoint"), (status = 404, description = "WEBHOOK_ENDPOINT_NOT_FOUND")))]
pub async fn update(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
    extract::Json(body): extract::Json<Value>,
) -> ApiResult<Json<Value>> {
    let request = pb::EndpointWrite {
        endpoint_id: id,
        body_json: body.to_string(),
    };
    let updated = app
        .webhooks
        .clone()
        .update_endpoint(access.request(request))
        .await?
        .into_inner();
    Ok(Json(parse(&updated.json)?))
}

#[utoipa::path(delete, path = "/api/v1/webhook-endpoints/{id}", tag = "webhooks",
    params(("id" = String, Path, description = "endpoint id")),
    responses((status = 200, description = "success")))]
pub async fn delete(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    app.webhooks
        .clone()
        .delete_endpoint(access.request(endpoint_ref(id)))
        .await?;
    Ok(Json(json!({ "success": true })))
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints/{id}/rotate-secret", tag = "webhooks",
    params(("id" = String, Path, description = "endpoint id")),
    responses((status = 200, description = "secret: the new one; the old one also signs for 24 h")))]
pub async fn rotate(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    rotate_secret(&app, &access, id).await.map(Json)
}

pub(crate) async fn rotate_secret(app: &AppState, access: &Access, id: String) -> ApiResult<Value> {
    let rotated = app
        .webhooks
        .clone()
        .rotate_secret(access.request(endpoint_ref(id)))
        .await?
        .into_inner();
    parse(&rotated.json)
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints/{id}/test", tag = "webhooks",
    params(("id" = String, Path, description = "endpoint id")),
    responses((status = 200, description = "message_id of the service.test message")))]
pub async fn test(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    Path(id): Path<String>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    send_test(&app, &access, id).await.map(Json)
}

pub(crate) async fn send_test(app: &AppState, access: &Access, id: String) -> ApiResult<Value> {
    let sent = app
        .webhooks
        .clone()
        .send_test(access.request(endpoint_ref(id)))
        .await?
        .into_inner();
    parse(&sent.json)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    limit: Option<i64>,
    cursor: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/webhook-endpoints/{id}/deliveries", tag = "webhooks",
    params(("id" = String, Path, description = "endpoint id"),
        ("limit" = Option<i64>, Query, description = "1–100, default 100"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page")),
    responses((status = 200, description = "message_id, event_type, status (pending|succeeded|failed), attempts, next_attempt_at_millis; newest first")))]
pub async fn deliveries(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<Value>> {
    let request = pb::ListDeliveriesRequest {
        endpoint_id: id,
        limit: q.limit,
        cursor: q.cursor,
    };
    let found = delivery_page(&app, &access, request).await?;
    page(&found.items_json, found.next_cursor)
}

pub(crate) async fn delivery_page(
    app: &AppState,
    access: &Access,
    request: pb::ListDeliveriesRequest,
) -> ApiResult<pb::DeliveryPage> {
    Ok(app
        .webhooks
        .clone()
        .list_deliveries(access.request(request))
        .await?
        .into_inner())
}

#[utoipa::path(post, path = "/api/v1/webhook-endpoints/{id}/deliveries/{message_id}/replay", tag = "webhooks",
    params(("id" = String, Path, description = "endpoint id"), ("message_id" = String, Path, description = "webhook-id")),
    responses((status = 200, description = "success; delivered again with the same webhook-id")))]
pub async fn replay(
    State(app): State<AppState>,
    AdminAccess(access): AdminAccess,
    Path((id, message_id)): Path<(String, String)>,
    _: Query<NoQuery>,
) -> ApiResult<Json<Value>> {
    replay_message(&app, &access, id, message_id).await?;
    Ok(Json(json!({ "success": true })))
}

/// Delivers a message again under the same `webhook-id`.
pub(crate) async fn replay_message(
    app: &AppState,
    access: &Access,
    endpoint_id: String,
    message_id: String,
) -> ApiResult<()> {
    let request = pb::ReplayRequest {
        endpoint_id,
        message_id,
    };
    app.webhooks.clone().replay(access.request(request)).await?;
    Ok(())
}
