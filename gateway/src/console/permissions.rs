//! The console's permissions page: team and project permission definitions with what each
//! contains; defining one, and deleting one after a confirmation page.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use serde::Deserialize;
use serde_json::json;

use super::pages::{self, page, redirect, Confirm, DefinitionRow, Nav, ScopeView};
use super::session::Session;
use super::{CsrfOnly, Posted, Signed};

const PERMISSION: pages::Thing = pages::Thing {
    section: "permissions",
    what: "permission",
    back: "/console/permissions",
};
use crate::routes::permissions as api;
use crate::state::AppState;

const SCOPES: [(&str, &str); 2] = [
    ("team", "Team permissions"),
    ("project", "Project permissions"),
];

fn scope(text: &str) -> Option<&'static str> {
    SCOPES.iter().map(|(s, _)| *s).find(|s| *s == text)
}

/// The page; `form` is (scope, id sent, the API's refusal) of a definition that failed.
async fn permissions_page(
    app: &AppState,
    session: &Session,
    status: StatusCode,
    notice: Option<String>,
    form: Option<(&str, String, String)>,
) -> Response {
    let access = session.access(None);
    let mut scopes = Vec::new();
    for (name, title) in SCOPES {
        let definitions = match api::definitions(app, &access, name).await {
            Ok(d) => d,
            Err(e) => return e.into_response(),
        };
        let (sent_id, error) = match &form {
            Some((s, id, error)) if *s == name => (id.clone(), Some(error.clone())),
            _ => (String::new(), None),
        };
        scopes.push(ScopeView {
            name,
            title,
            definitions: definitions.iter().map(DefinitionRow::of).collect(),
            sent_id,
            error,
        });
    }
    page(
        status,
        &pages::Permissions {
            nav: Some(Nav::of(session, "permissions")),
            csrf: session.csrf.clone(),
            scopes,
            notice,
        },
    )
}

pub async fn list(State(app): State<AppState>, Signed(_, session): Signed) -> Response {
    permissions_page(&app, &session, StatusCode::OK, None, None).await
}

#[derive(Deserialize)]
pub struct DefineForm {
    csrf: Option<String>,
    id: String,
    description: Option<String>,
    contains: Option<String>,
}

pub async fn define(
    State(app): State<AppState>,
    Path(scope_text): Path<String>,
    Posted(Signed(_, session), form): Posted<DefineForm>,
) -> Response {
    let Some(scope) = scope(&scope_text) else {
        return redirect("/console/permissions");
    };
    let contained: Vec<&str> = form
        .contains
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let id = form.id.trim().to_owned();
    let body = json!({
        "id": id,
        "description": form.description.unwrap_or_default(),
        "contained_permission_ids": contained,
    });
    match api::create_def(&app, &session.access(None), scope, &body).await {
        Ok(_) => {
            let notice = Some(format!("{id} is defined."));
            permissions_page(&app, &session, StatusCode::CREATED, notice, None).await
        }
        Err(e) => {
            let form = Some((scope, id, e.0.message));
            permissions_page(&app, &session, StatusCode::BAD_REQUEST, None, form).await
        }
    }
}

pub async fn confirm_delete(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path((scope_text, id)): Path<(String, String)>,
) -> Response {
    let Some(scope) = scope(&scope_text) else {
        return redirect("/console/permissions");
    };
    let found = api::definitions(&app, &session.access(None), scope).await;
    let found = found.map(|list| list.iter().any(|d| d["id"] == id.as_str()));
    if let Some(refusal) = pages::unless_found(found, &session, &PERMISSION) {
        return refusal;
    }
    page(
        StatusCode::OK,
        &Confirm {
            nav: Some(Nav::of(&session, "permissions")),
            csrf: session.csrf.clone(),
            question: format!("Delete the {scope} permission {id}?"),
            consequence: "Every grant of it ends, and definitions that contained it no longer \
                          do. This cannot be undone."
                .into(),
            action: format!("/console/permissions/{scope}/{id}/delete"),
            confirm: "Delete",
            back: "/console/permissions",
        },
    )
}

pub async fn delete(
    State(app): State<AppState>,
    Path((scope_text, id)): Path<(String, String)>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let Some(scope) = scope(&scope_text) else {
        return redirect("/console/permissions");
    };
    match api::delete_def(&app, &session.access(None), scope, id.clone()).await {
        Ok(()) => {
            let notice = Some(format!("{id} was deleted."));
            permissions_page(&app, &session, StatusCode::OK, notice, None).await
        }
        Err(e) if e.status() == StatusCode::NOT_FOUND => pages::missing(&session, &PERMISSION),
        Err(e) => {
            let status = e.status();
            permissions_page(&app, &session, status, Some(e.0.message), None).await
        }
    }
}

super::csrf_form!(DefineForm);
