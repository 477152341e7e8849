//! The console's pages: askama templates (`gateway/templates/console/`) and what they show.

use askama::Template;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;
use uuid::Uuid;

use super::session::Session;

/// What every signed-in page's header shows.
pub struct Nav {
    pub csrf: String,
    pub current: String,
    /// (project id, display name)
    pub projects: Vec<(String, String)>,
    pub section: &'static str,
}

impl Nav {
    pub fn of(session: &Session, section: &'static str) -> Self {
        Self {
            csrf: session.csrf.clone(),
            current: session.current.to_string(),
            projects: session
                .projects
                .iter()
                .map(|p| (p.project_id.to_string(), p.name.clone()))
                .collect(),
            section,
        }
    }
}

#[derive(Template)]
#[template(path = "console/sign_in.html")]
pub struct SignIn {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub project_id: String,
    pub error: Option<String>,
}

/// One setting as the project page edits it.
pub struct Field {
    pub name: String,
    /// bool, number, string or json
    pub kind: &'static str,
    pub value: String,
    pub rows: usize,
    pub error: Option<String>,
}

impl Field {
    pub fn of(name: &str, value: &Value) -> Self {
        let (kind, text) = match value {
            Value::Bool(b) => ("bool", b.to_string()),
            Value::Number(n) => ("number", n.to_string()),
            Value::String(s) => ("string", s.clone()),
            other => (
                "json",
                serde_json::to_string_pretty(other).unwrap_or_default(),
            ),
        };
        Self {
            name: name.to_owned(),
            kind,
            rows: text.lines().count().clamp(2, 16),
            value: text,
            error: None,
        }
    }
}

#[derive(Template)]
#[template(path = "console/project.html")]
pub struct Project {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub fields: Vec<Field>,
    pub saved: bool,
    pub general_error: Option<String>,
}

/// A key set row.
pub struct KeyRow {
    pub id: String,
    pub description: String,
    pub tails: String,
    pub created: String,
    pub created_at_millis: i64,
    pub status: &'static str,
}

impl KeyRow {
    pub fn of(k: &Value) -> Self {
        let tail = |field: &str, label: &str| {
            k[field]["last_four"]
                .as_str()
                .map(|t| format!("{label} …{t}"))
        };
        let tails: Vec<String> = [
            tail("publishable_client_key", "client"),
            tail("secret_server_key", "server"),
            tail("super_secret_admin_key", "admin"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let created_at_millis = k["created_at_millis"].as_i64().unwrap_or_default();
        let expired = k["expires_at_millis"]
            .as_i64()
            .is_some_and(|e| e <= latchkey_shared::clock::system().now_millis());
        Self {
            id: k["id"].as_str().unwrap_or_default().to_owned(),
            description: k["description"].as_str().unwrap_or_default().to_owned(),
            tails: tails.join(", "),
            created: latchkey_shared::clock::iso8601_millis(created_at_millis),
            created_at_millis,
            status: if k["revoked"].as_bool() == Some(true) {
                "revoked"
            } else if expired {
                "expired"
            } else {
                "active"
            },
        }
    }
}

#[derive(Template)]
#[template(path = "console/keys.html")]
pub struct Keys {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub keys: Vec<KeyRow>,
    /// (label, whole key), shown once after creation.
    pub created: Option<Vec<(String, String)>>,
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "console/confirm.html")]
pub struct Confirm {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub question: String,
    pub consequence: String,
    pub action: String,
    pub confirm: &'static str,
    pub back: &'static str,
}

/// A rendered page with `status`.
pub fn page(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "console page failed to render");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "The page failed to render.",
            )
                .into_response()
        }
    }
}

/// See-other to `to`.
pub fn redirect(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        response
            .headers_mut()
            .insert(axum::http::header::LOCATION, v);
    }
    response
}

pub fn parse_project(text: &str) -> Option<Uuid> {
    Uuid::parse_str(text.trim()).ok()
}
