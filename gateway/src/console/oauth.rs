//! The console's OAuth providers: listed on the project page, each edited on a form of its own
//! (the client secret write-only: typed to replace it, never shown), added, and removed after a
//! confirmation. Every change is one `PATCH /internal/project` of the whole provider list, so
//! the API's own validation decides and its refusal is shown beside the form.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::pages::{page, redirect, Confirm, Nav, ProviderForm, TypeOption};
use super::session::Session;
use super::{CsrfOnly, Posted, Signed};
use latchkey_shared::providers::PROVIDER_TYPES;

use crate::access::Access;
use crate::error::ApiResult;
use crate::routes::internal;
use crate::state::AppState;

/// Optional text settings of a provider, in the order the form shows them.
pub const TEXT_FIELDS: &[&str] = &[
    "client_id",
    "issuer",
    "authorization_endpoint",
    "token_endpoint",
    "userinfo_endpoint",
    "scope",
    "account_id_field",
    "email_field",
    "email_verified_field",
];

async fn providers(app: &AppState, access: &Access) -> ApiResult<Vec<Value>> {
    let settings = internal::settings(app, access).await?;
    Ok(settings["oauth_providers"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

fn form_view(
    session: &Session,
    status: StatusCode,
    provider: &Value,
    is_new: bool,
    error: Option<String>,
) -> Response {
    let text = |name: &str| provider[name].as_str().unwrap_or_default().to_owned();
    page(
        status,
        &ProviderForm {
            csrf: session.csrf.clone(),
            nav: Some(Nav::of(session, "project")),
            id: text("id"),
            types: PROVIDER_TYPES
                .iter()
                .map(|t| TypeOption {
                    name: t,
                    selected: provider["type"] == *t,
                })
                .collect(),
            fields: TEXT_FIELDS.iter().map(|f| (*f, text(f))).collect(),
            shared: provider["shared"] == Value::Bool(true),
            secret_set: provider["client_secret_set"] == Value::Bool(true),
            allow_sign_in: provider["allow_sign_in"] != Value::Bool(false),
            allow_connected_accounts: provider["allow_connected_accounts"] == Value::Bool(true),
            is_new,
            error,
        },
    )
}

pub async fn new_form(Signed(_, session): Signed) -> Response {
    form_view(
        &session,
        StatusCode::OK,
        &json!({ "type": "oidc" }),
        true,
        None,
    )
}

pub async fn edit_form(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
) -> Response {
    match providers(&app, &session.access(None)).await {
        Ok(list) => match list.iter().find(|p| p["id"] == id.as_str()) {
            Some(p) => form_view(&session, StatusCode::OK, p, false, None),
            None => not_found(&session),
        },
        Err(e) => e.into_response(),
    }
}

fn not_found(session: &Session) -> Response {
    form_view(
        session,
        StatusCode::NOT_FOUND,
        &json!({ "type": "oidc" }),
        true,
        Some("The project has no such OAuth provider; add it here.".into()),
    )
}

/// The form as a provider document: blank fields are left out, and the secret is sent only
/// when one was typed (or removed on request), so the stored one is otherwise kept.
fn provider_of(form: &[(String, String)], id: &str) -> Value {
    let get = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    };
    let mut doc = Map::new();
    doc.insert("id".into(), json!(id));
    doc.insert("type".into(), json!(get("type").unwrap_or_default()));
    for name in TEXT_FIELDS {
        if let Some(v) = get(name) {
            doc.insert((*name).into(), json!(v));
        }
    }
    for flag in ["shared", "allow_sign_in", "allow_connected_accounts"] {
        doc.insert(flag.into(), json!(get(flag).is_some()));
    }
    if let Some(secret) = get("client_secret") {
        doc.insert("client_secret".into(), json!(secret));
    } else if get("remove_client_secret").is_some() {
        doc.insert("client_secret_set".into(), json!(false));
    }
    Value::Object(doc)
}

/// Adds a provider, its id from the form.
pub async fn add(
    State(app): State<AppState>,
    Posted(Signed(_, session), form): Posted<Vec<(String, String)>>,
) -> Response {
    save(&app, &session, &form, None).await
}

/// Replaces the provider named in the path.
pub async fn update(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), form): Posted<Vec<(String, String)>>,
) -> Response {
    save(&app, &session, &form, Some(id)).await
}

async fn save(
    app: &AppState,
    session: &Session,
    form: &[(String, String)],
    path: Option<String>,
) -> Response {
    let access = session.access(None);
    let mut list = match providers(app, &access).await {
        Ok(list) => list,
        Err(e) => return e.into_response(),
    };
    let is_new = path.is_none();
    let id = match path {
        Some(id) => id,
        None => form
            .iter()
            .find(|(k, _)| k == "id")
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default(),
    };
    let provider = provider_of(form, &id);
    let existing = list.iter().position(|p| p["id"] == id.as_str());
    let stored_secret = existing.map(|i| list[i]["client_secret_set"].clone());
    match (is_new, existing) {
        (false, None) => return not_found(session),
        (true, Some(_)) => {
            let error = format!("A provider with the id {id} exists already.");
            return form_view(
                session,
                StatusCode::BAD_REQUEST,
                &provider,
                true,
                Some(error),
            );
        }
        (_, Some(i)) => list[i] = provider.clone(),
        (true, None) => list.push(provider.clone()),
    }
    let patch = json!({ "oauth_providers": list });
    match internal::change_settings(app, &access, &patch).await {
        Ok(_) => redirect("/console/project?saved=1#oauth-providers"),
        Err(e) => {
            let mut shown = provider;
            // What was stored still is: the form says so, and no typed secret is echoed.
            if let Some(obj) = shown.as_object_mut() {
                obj.remove("client_secret");
            }
            if let Some(stored) = stored_secret {
                shown["client_secret_set"] = stored;
            }
            let error = Some(e.0.message.clone());
            form_view(session, StatusCode::BAD_REQUEST, &shown, is_new, error)
        }
    }
}

pub async fn confirm_remove(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
) -> Response {
    match providers(&app, &session.access(None)).await {
        Ok(list) if list.iter().any(|p| p["id"] == id.as_str()) => page(
            StatusCode::OK,
            &Confirm {
                csrf: session.csrf.clone(),
                nav: Some(Nav::of(&session, "project")),
                question: format!("Remove the OAuth provider {id}?"),
                consequence: "Users stop signing in with it at once (their accounts stay), and \
                              its client secret is deleted."
                    .into(),
                action: format!("/console/project/oauth/{id}/remove"),
                confirm: "Remove",
                back: "/console/project#oauth-providers",
            },
        ),
        Ok(_) => not_found(&session),
        Err(e) => e.into_response(),
    }
}

pub async fn remove(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let access = session.access(None);
    let mut list = match providers(&app, &access).await {
        Ok(list) => list,
        Err(e) => return e.into_response(),
    };
    let before = list.len();
    list.retain(|p| p["id"] != id.as_str());
    if list.len() == before {
        return not_found(&session);
    }
    let patch = json!({ "oauth_providers": list });
    match internal::change_settings(&app, &access, &patch).await {
        Ok(_) => redirect("/console/project?saved=1#oauth-providers"),
        Err(e) => e.into_response(),
    }
}
