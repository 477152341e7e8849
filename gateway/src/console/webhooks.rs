//! The console's webhooks and mail pages: endpoints (added with their secret shown once), each
//! endpoint's delivery log with every attempt, replay, a test event and secret rotation; and
//! the project's sent mail.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use latchkey_proto::webhooks::v1 as pb;
use serde::Deserialize;
use serde_json::{json, Value};

use super::pages::{self, page, redirect, Confirm, DeliveryRow, EndpointRow, MailRow, Nav};
use super::session::Session;
use super::{uuid_param, CsrfOnly, Posted, Signed};
use crate::routes::{internal, webhook_endpoints as api};
use crate::state::AppState;

async fn list_page(
    app: &AppState,
    session: &Session,
    status: StatusCode,
    secret: Option<String>,
    form: (String, Option<String>),
) -> Response {
    match api::endpoints(app, &session.access(None)).await {
        Ok(endpoints) => page(
            status,
            &pages::Webhooks {
                nav: Some(Nav::of(session, "webhooks")),
                csrf: session.csrf.clone(),
                endpoints: endpoints.iter().map(EndpointRow::of).collect(),
                secret,
                url: form.0,
                error: form.1,
            },
        ),
        Err(e) => e.into_response(),
    }
}

pub async fn list(State(app): State<AppState>, Signed(_, session): Signed) -> Response {
    list_page(&app, &session, StatusCode::OK, None, Default::default()).await
}

#[derive(Deserialize)]
pub struct AddForm {
    csrf: Option<String>,
    url: String,
    description: Option<String>,
}

pub async fn add(
    State(app): State<AppState>,
    Posted(Signed(_, session), form): Posted<AddForm>,
) -> Response {
    let body = json!({ "url": form.url, "description": form.description.unwrap_or_default() });
    match api::create_endpoint(&app, &session.access(None), &body).await {
        Ok(created) => {
            let secret = created["secret"].as_str().map(str::to_owned);
            list_page(
                &app,
                &session,
                StatusCode::CREATED,
                secret,
                Default::default(),
            )
            .await
        }
        Err(e) => {
            let refused = (form.url, Some(e.0.message));
            list_page(&app, &session, StatusCode::BAD_REQUEST, None, refused).await
        }
    }
}

const ENDPOINT: pages::Thing = pages::Thing {
    section: "webhooks",
    what: "webhook endpoint",
    back: "/console/webhooks",
};

#[derive(Deserialize, Default)]
pub struct PageQuery {
    cursor: Option<String>,
}

/// The endpoint page; `said` is (secret, notice, error) from the action that led here.
async fn endpoint_page(
    app: &AppState,
    session: &Session,
    id: &str,
    cursor: Option<String>,
    said: (Option<String>, Option<String>, Option<String>),
) -> Response {
    let access = session.access(None);
    let endpoints = match api::endpoints(app, &access).await {
        Ok(e) => e,
        Err(e) => return e.into_response(),
    };
    let Some(endpoint) = endpoints
        .iter()
        .find(|e| e["id"] == Value::String(id.to_owned()))
    else {
        return pages::missing(session, &ENDPOINT);
    };
    let request = pb::ListDeliveriesRequest {
        endpoint_id: id.to_owned(),
        limit: Some(50),
        cursor,
    };
    let found = match api::delivery_page(app, &access, request).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let deliveries = found
        .items_json
        .iter()
        .filter_map(|j| serde_json::from_str::<Value>(j).ok())
        .map(|m| DeliveryRow::of(&m))
        .collect();
    let next = found.next_cursor.map(|c| {
        let encoded = serde_urlencoded::to_string([("cursor", c.as_str())]).unwrap_or_default();
        format!("/console/webhooks/{id}?{encoded}")
    });
    page(
        StatusCode::OK,
        &pages::Webhook {
            nav: Some(Nav::of(session, "webhooks")),
            csrf: session.csrf.clone(),
            endpoint: EndpointRow::of(endpoint),
            deliveries,
            next,
            secret: said.0,
            notice: said.1,
            error: said.2,
        },
    )
}

pub async fn show(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/webhooks");
    };
    endpoint_page(&app, &session, &id, q.cursor, Default::default()).await
}

pub async fn send_test(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/webhooks");
    };
    let said = match api::send_test(&app, &session.access(None), id.clone()).await {
        Ok(_) => (
            None,
            Some("A service.test event is on its way.".to_owned()),
            None,
        ),
        Err(e) => (None, None, Some(e.0.message)),
    };
    endpoint_page(&app, &session, &id, None, said).await
}

pub async fn replay(
    State(app): State<AppState>,
    Path((id, message_id)): Path<(String, String)>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/webhooks");
    };
    let access = session.access(None);
    let said = match api::replay_message(&app, &access, id.clone(), message_id.clone()).await {
        Ok(()) => (
            None,
            Some(format!(
                "Message {message_id} is delivered again, under the same webhook-id."
            )),
            None,
        ),
        Err(e) => (None, None, Some(e.0.message)),
    };
    endpoint_page(&app, &session, &id, None, said).await
}

pub async fn confirm_rotate(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/webhooks");
    };
    let found = api::endpoints(&app, &session.access(None)).await;
    let found = found.map(|list| list.iter().any(|e| e["id"] == id.as_str()));
    if let Some(refusal) = pages::unless_found(found, &session, &ENDPOINT) {
        return refusal;
    }
    page(
        StatusCode::OK,
        &Confirm {
            nav: Some(Nav::of(&session, "webhooks")),
            csrf: session.csrf.clone(),
            question: "Rotate this endpoint's signing secret?".into(),
            consequence: "A new secret signs every message from now on; the old one also signs \
                          for 24 hours, so the receiver has a day to switch."
                .into(),
            action: format!("/console/webhooks/{id}/rotate"),
            confirm: "Rotate",
            back: "/console/webhooks",
        },
    )
}

pub async fn rotate(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/webhooks");
    };
    let said = match api::rotate_secret(&app, &session.access(None), id.clone()).await {
        Ok(rotated) => (rotated["secret"].as_str().map(str::to_owned), None, None),
        Err(e) => (None, None, Some(e.0.message)),
    };
    endpoint_page(&app, &session, &id, None, said).await
}

pub async fn mail(State(app): State<AppState>, Signed(_, session): Signed) -> Response {
    match internal::emails(&app, &session.access(None)).await {
        Ok(mails) => page(
            StatusCode::OK,
            &pages::Mail {
                nav: Some(Nav::of(&session, "mail")),
                mails: mails.iter().map(MailRow::of).collect(),
            },
        ),
        Err(e) => e.into_response(),
    }
}

super::csrf_form!(AddForm);
