//! The console's users pages: a searchable, keyset-paged table (the users list of the API, so
//! every variant is answered from an index) and a page per user with its sessions, metadata
//! and deletion.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use latchkey_proto::auth::v1 as pb;
use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::pages::{self, page, redirect, Confirm, Nav, SessionRow, UserFacts, UserRow, Users};
use super::session::Session;
use super::{uuid_param, CsrfOnly, Posted, Signed};
use crate::routes::{auth_sessions, users as api};
use crate::state::AppState;

const PAGE: i64 = 50;

#[derive(Deserialize)]
pub struct ListQuery {
    query: Option<String>,
    cursor: Option<String>,
    desc: Option<String>,
}

fn link(query: &str, desc: bool, cursor: &str) -> String {
    let mut pairs = Vec::new();
    if !query.is_empty() {
        pairs.push(("query", query));
    }
    if desc {
        pairs.push(("desc", "true"));
    }
    pairs.push(("cursor", cursor));
    let encoded = serde_urlencoded::to_string(&pairs).unwrap_or_default();
    format!("/console/users?{encoded}")
}

pub async fn list(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Query(q): Query<ListQuery>,
) -> Response {
    let query = q.query.unwrap_or_default().trim().to_owned();
    let desc = q.desc.as_deref() == Some("true");
    let cursor = q.cursor.filter(|c| Uuid::parse_str(c).is_ok());
    let request = pb::ListUsersRequest {
        limit: Some(PAGE),
        cursor,
        desc,
        query: (!query.is_empty()).then(|| query.clone()),
        team_id: None,
        include_restricted: true,
        include_anonymous: false,
        only_anonymous: false,
    };
    let (users, next, error) = match api::users_page(&app, &session.access(None), request).await {
        Ok(p) => {
            let users = p
                .items_json
                .iter()
                .filter_map(|j| serde_json::from_str::<Value>(j).ok())
                .map(|u| UserRow::of(&u))
                .collect();
            let next = p.next_cursor.map(|c| link(&query, desc, &c));
            (users, next, None)
        }
        Err(e) => (Vec::new(), None, Some(e.0.message)),
    };
    page(
        StatusCode::OK,
        &Users {
            nav: Some(Nav::of(&session, "users")),
            users,
            query,
            desc,
            next,
            error,
        },
    )
}

/// The user's live sessions; none when they cannot be read (the page shows what it can).
async fn live_sessions(app: &AppState, access: &crate::access::Access, id: &str) -> Vec<Value> {
    match Uuid::parse_str(id) {
        Ok(uid) => auth_sessions::sessions_of(app, access, uid)
            .await
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

const USER: pages::Thing = pages::Thing {
    section: "users",
    what: "user",
    back: "/console/users",
};

/// The user page, with `notice` or `error` above it and metadata `edited` by the form.
async fn user_page(
    app: &AppState,
    session: &Session,
    id: &str,
    status: StatusCode,
    message: (Option<String>, Option<String>),
    edited: Option<Vec<pages::Field>>,
) -> Response {
    let access = session.access(None);
    let user = match api::get_user(app, &access, id.to_owned()).await {
        Ok(text) => serde_json::from_str::<Value>(&text.0).unwrap_or_default(),
        Err(e) => return e.into_response(),
    };
    let sessions = live_sessions(app, &access, id).await;
    page(
        status,
        &pages::User {
            nav: Some(Nav::of(session, "users")),
            csrf: session.csrf.clone(),
            user: UserFacts::of(&user),
            sessions: sessions.iter().map(SessionRow::of).collect(),
            metadata: edited.unwrap_or_else(|| pages::metadata_of(&user)),
            notice: message.0,
            error: message.1,
        },
    )
}

pub async fn show(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/users");
    };
    user_page(&app, &session, &id, StatusCode::OK, (None, None), None).await
}

/// Saves the metadata documents that changed; each must be a JSON object (the API's rule),
/// and an error is shown under the document that caused it.
pub async fn save_metadata(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), form): Posted<Vec<(String, String)>>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/users");
    };
    let mut fields = Vec::new();
    let mut body = Map::new();
    for name in pages::METADATA {
        let text = form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| "{}".into());
        let mut field = pages::Field::of(name, &Value::Null);
        field.kind = "json";
        field.rows = text.lines().count().clamp(3, 16);
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => {
                body.insert(name.to_owned(), v);
            }
            Err(e) => field.error = Some(format!("Not valid JSON: {e}")),
        }
        field.value = text;
        fields.push(field);
    }
    if fields.iter().any(|f| f.error.is_some()) {
        let message = (None, Some("Nothing was saved.".to_owned()));
        return user_page(
            &app,
            &session,
            &id,
            StatusCode::BAD_REQUEST,
            message,
            Some(fields),
        )
        .await;
    }
    match api::update_user(&app, &session.access(None), id.clone(), Value::Object(body)).await {
        Ok(_) => {
            let message = (Some("Metadata saved.".to_owned()), None);
            user_page(&app, &session, &id, StatusCode::OK, message, None).await
        }
        Err(e) => {
            let text = e.0.message;
            if let Some(f) = fields.iter_mut().find(|f| text.contains(f.name.as_str())) {
                f.error = Some(text.clone());
            }
            let message = (None, Some(format!("Nothing was saved: {text}")));
            user_page(
                &app,
                &session,
                &id,
                StatusCode::BAD_REQUEST,
                message,
                Some(fields),
            )
            .await
        }
    }
}

pub async fn revoke_session(
    State(app): State<AppState>,
    Path((id, session_id)): Path<(String, String)>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/users");
    };
    // Only a session of this user: the page lists those, and nothing else may be ended here.
    let access = session.access(None);
    let sessions = live_sessions(&app, &access, &id).await;
    if !sessions
        .iter()
        .any(|s| s["id"] == Value::String(session_id.clone()))
    {
        let message = (None, Some("That session has already ended.".to_owned()));
        return user_page(&app, &session, &id, StatusCode::NOT_FOUND, message, None).await;
    }
    let message = match auth_sessions::end_session(&app, &access, session_id).await {
        Ok(()) => (Some("The session was revoked.".to_owned()), None),
        Err(e) => (None, Some(e.0.message)),
    };
    user_page(&app, &session, &id, StatusCode::OK, message, None).await
}

pub async fn revoke_all_sessions(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/users");
    };
    let access = session.access(None);
    let sessions = live_sessions(&app, &access, &id).await;
    let mut failed = None;
    for s in sessions {
        let sid = s["id"].as_str().unwrap_or_default().to_owned();
        if let Err(e) = auth_sessions::end_session(&app, &access, sid).await {
            failed = Some(e.0.message);
        }
    }
    let message = match failed {
        None => (Some("Every session was revoked.".to_owned()), None),
        Some(e) => (None, Some(e)),
    };
    user_page(&app, &session, &id, StatusCode::OK, message, None).await
}

pub async fn confirm_delete(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/users");
    };
    let found = api::get_user(&app, &session.access(None), id.clone()).await;
    if let Some(refusal) = pages::unless_found(found.map(|_| true), &session, &USER) {
        return refusal;
    }
    page(
        StatusCode::OK,
        &Confirm {
            nav: Some(Nav::of(&session, "users")),
            csrf: session.csrf.clone(),
            question: "Delete this user?".into(),
            consequence: format!(
                "User {id} is deleted with its sessions, contact channels, team memberships and \
                 permissions, and a user.deleted event is sent. This cannot be undone."
            ),
            action: format!("/console/users/{id}/delete"),
            confirm: "Delete",
            back: "/console/users",
        },
    )
}

pub async fn delete(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/users");
    };
    match api::delete_user(&app, &session.access(None), id.clone()).await {
        Ok(_) => redirect("/console/users"),
        Err(e) => {
            let message = (None, Some(e.0.message));
            user_page(&app, &session, &id, StatusCode::BAD_REQUEST, message, None).await
        }
    }
}
