//! The console's pages: askama templates (`gateway/templates/console/`) and what they show.

use askama::Template;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde_json::Value;
use uuid::Uuid;

use super::session::Session;
use crate::error::ApiError;

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
    pub test_mail: Option<TestMail>,
    pub providers: Vec<ProviderRow>,
}

/// An OAuth provider in the project page's list.
pub struct ProviderRow {
    pub id: String,
    pub provider_type: String,
    pub client_id: String,
    pub secret_set: bool,
    pub allow_sign_in: bool,
}

impl ProviderRow {
    pub fn of(p: &Value) -> Self {
        let text = |name: &str| p[name].as_str().unwrap_or_default().to_owned();
        Self {
            id: text("id"),
            provider_type: text("type"),
            client_id: text("client_id"),
            secret_set: p["client_secret_set"] == Value::Bool(true),
            allow_sign_in: p["allow_sign_in"] != Value::Bool(false),
        }
    }
}

pub struct TypeOption {
    pub name: &'static str,
    pub selected: bool,
}

/// One OAuth provider's form; the client secret is never shown, only whether one is stored.
#[derive(Template)]
#[template(path = "console/oauth.html")]
pub struct ProviderForm {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub id: String,
    pub types: Vec<TypeOption>,
    /// (setting, value) of the optional text settings.
    pub fields: Vec<(&'static str, String)>,
    pub shared: bool,
    pub secret_set: bool,
    pub allow_sign_in: bool,
    pub allow_connected_accounts: bool,
    pub is_new: bool,
    pub error: Option<String>,
}

/// The mail server's answer to a test mail, shown beside its form.
pub struct TestMail {
    pub to: String,
    pub sent: bool,
    pub message: String,
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

/// What a page or form names is not in the signed-in project.
#[derive(Template)]
#[template(path = "console/missing.html")]
pub struct Missing {
    pub nav: Option<Nav>,
    pub what: String,
    pub back: &'static str,
}

/// Something a console page names by id: its section, what it is called, and where the
/// page that lists it is.
pub struct Thing {
    pub section: &'static str,
    pub what: &'static str,
    pub back: &'static str,
}

/// 404 for something the signed-in project does not have, whether it is gone, was never
/// there, or is another project's: the page does not say which.
pub fn missing(session: &Session, thing: &Thing) -> Response {
    page(
        StatusCode::NOT_FOUND,
        &Missing {
            nav: Some(Nav::of(session, thing.section)),
            what: thing.what.to_owned(),
            back: thing.back,
        },
    )
}

/// What a page answers instead when the thing it names is not the project's: `found` is the
/// look-up, where the API's 404 counts as not found.
pub fn unless_found(
    found: Result<bool, ApiError>,
    session: &Session,
    thing: &Thing,
) -> Option<Response> {
    match found {
        Ok(true) => None,
        Ok(false) => Some(missing(session, thing)),
        Err(e) if e.status() == StatusCode::NOT_FOUND => Some(missing(session, thing)),
        Err(e) => Some(e.into_response()),
    }
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

/// A users-table row.
pub struct UserRow {
    pub id: String,
    pub email: String,
    pub name: String,
    pub signed_up: String,
    pub signed_up_at_millis: i64,
}

impl UserRow {
    pub fn of(u: &Value) -> Self {
        let signed_up_at_millis = u["signed_up_at_millis"].as_i64().unwrap_or_default();
        Self {
            id: u["id"].as_str().unwrap_or_default().to_owned(),
            email: u["primary_email"]
                .as_str()
                .unwrap_or("(no e-mail)")
                .to_owned(),
            name: u["display_name"].as_str().unwrap_or_default().to_owned(),
            signed_up: latchkey_shared::clock::iso8601_millis(signed_up_at_millis),
            signed_up_at_millis,
        }
    }
}

#[derive(Template)]
#[template(path = "console/users.html")]
pub struct Users {
    pub nav: Option<Nav>,
    pub users: Vec<UserRow>,
    pub query: String,
    pub desc: bool,
    pub next: Option<String>,
    pub error: Option<String>,
}

/// What the user page says about the user.
pub struct UserFacts {
    pub id: String,
    pub email: String,
    pub name: String,
    pub signed_up: String,
    pub verified: &'static str,
    pub methods: String,
    pub team: String,
}

impl UserFacts {
    pub fn of(u: &Value) -> Self {
        let row = UserRow::of(u);
        let mut methods = Vec::new();
        for (field, label) in [
            ("has_password", "password"),
            ("otp_auth_enabled", "one-time code"),
            ("passkey_auth_enabled", "passkey"),
            ("requires_totp_mfa", "TOTP second factor"),
        ] {
            if u[field] == Value::Bool(true) {
                methods.push(label.to_owned());
            }
        }
        for p in u["oauth_providers"].as_array().into_iter().flatten() {
            methods.push(format!("OAuth {}", p["id"].as_str().unwrap_or_default()));
        }
        Self {
            id: row.id,
            email: row.email,
            name: row.name,
            signed_up: row.signed_up,
            verified: if u["primary_email_verified"] == Value::Bool(true) {
                "yes"
            } else {
                "no"
            },
            methods: if methods.is_empty() {
                "none".into()
            } else {
                methods.join(", ")
            },
            team: u["selected_team_id"].as_str().unwrap_or("none").to_owned(),
        }
    }
}

/// A session row.
pub struct SessionRow {
    pub id: String,
    pub created: String,
    pub created_at: i64,
    pub last_used: String,
    pub last_used_at: i64,
    pub kind: &'static str,
}

impl SessionRow {
    pub fn of(s: &Value) -> Self {
        let created_at = s["created_at"].as_i64().unwrap_or_default();
        let last_used_at = s["last_used_at"].as_i64().unwrap_or_default();
        Self {
            id: s["id"].as_str().unwrap_or_default().to_owned(),
            created: latchkey_shared::clock::iso8601_millis(created_at),
            created_at,
            last_used: latchkey_shared::clock::iso8601_millis(last_used_at),
            last_used_at,
            kind: if s["is_impersonation"] == Value::Bool(true) {
                "impersonation"
            } else {
                "sign-in"
            },
        }
    }
}

#[derive(Template)]
#[template(path = "console/user.html")]
pub struct User {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub user: UserFacts,
    pub sessions: Vec<SessionRow>,
    pub metadata: Vec<Field>,
    pub notice: Option<String>,
    pub error: Option<String>,
}

/// The three metadata documents of a user, as JSON editors.
pub const METADATA: [&str; 3] = [
    "client_metadata",
    "client_read_only_metadata",
    "server_metadata",
];

pub fn metadata_of(u: &Value) -> Vec<Field> {
    METADATA
        .iter()
        .map(|name| {
            let mut f = Field::of(name, &u[*name]);
            f.kind = "json";
            f.value = serde_json::to_string_pretty(&u[*name]).unwrap_or_default();
            f.rows = f.value.lines().count().clamp(3, 16);
            f
        })
        .collect()
}

/// A teams-table row, or the head of a team page.
pub struct TeamRow {
    pub id: String,
    pub name: String,
    pub created: String,
    pub created_at_millis: i64,
}

impl TeamRow {
    pub fn of(t: &Value) -> Self {
        let created_at_millis = t["created_at_millis"].as_i64().unwrap_or_default();
        Self {
            id: t["id"].as_str().unwrap_or_default().to_owned(),
            name: t["display_name"].as_str().unwrap_or_default().to_owned(),
            created: latchkey_shared::clock::iso8601_millis(created_at_millis),
            created_at_millis,
        }
    }
}

#[derive(Template)]
#[template(path = "console/teams.html")]
pub struct Teams {
    pub nav: Option<Nav>,
    pub teams: Vec<TeamRow>,
}

/// A member with its profile and permissions.
pub struct MemberRow {
    pub user_id: String,
    pub name: String,
    pub email: String,
    pub permissions: String,
}

#[derive(Template)]
#[template(path = "console/team.html")]
pub struct Team {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub team: TeamRow,
    pub members: Vec<MemberRow>,
    /// (recipient, expiry)
    pub invitations: Vec<(String, String)>,
    pub notice: Option<String>,
    pub add_user_id: String,
    pub add_error: Option<String>,
}

/// A webhook endpoint as the pages show it.
pub struct EndpointRow {
    pub id: String,
    pub url: String,
    pub description: String,
    pub events: String,
    pub enabled: &'static str,
}

impl EndpointRow {
    pub fn of(e: &Value) -> Self {
        let events: Vec<&str> = e["event_types"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        Self {
            id: e["id"].as_str().unwrap_or_default().to_owned(),
            url: e["url"].as_str().unwrap_or_default().to_owned(),
            description: e["description"].as_str().unwrap_or_default().to_owned(),
            events: if events.is_empty() {
                "all".into()
            } else {
                events.join(", ")
            },
            enabled: if e["enabled"] == Value::Bool(false) {
                "no"
            } else {
                "yes"
            },
        }
    }
}

#[derive(Template)]
#[template(path = "console/webhooks.html")]
pub struct Webhooks {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub endpoints: Vec<EndpointRow>,
    pub secret: Option<String>,
    pub url: String,
    pub error: Option<String>,
}

/// A message to an endpoint, with each attempt in words.
pub struct DeliveryRow {
    pub message_id: String,
    pub event_type: String,
    pub status: String,
    pub attempts: Vec<String>,
}

impl DeliveryRow {
    pub fn of(m: &Value) -> Self {
        let attempts = m["attempts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                let at = latchkey_shared::clock::iso8601_millis(
                    a["at_millis"].as_i64().unwrap_or_default(),
                );
                let outcome = match (a["response_status"].as_i64(), a["error"].as_str()) {
                    (Some(status), _) => format!("HTTP {status}"),
                    (None, Some(error)) => error.to_owned(),
                    (None, None) => "no answer".to_owned(),
                };
                format!(
                    "{at}: {outcome} ({} ms)",
                    a["duration_ms"].as_i64().unwrap_or_default()
                )
            })
            .collect();
        Self {
            message_id: m["message_id"].as_str().unwrap_or_default().to_owned(),
            event_type: m["event_type"].as_str().unwrap_or_default().to_owned(),
            status: m["status"].as_str().unwrap_or_default().to_owned(),
            attempts,
        }
    }
}

#[derive(Template)]
#[template(path = "console/webhook.html")]
pub struct Webhook {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub endpoint: EndpointRow,
    pub deliveries: Vec<DeliveryRow>,
    pub next: Option<String>,
    pub secret: Option<String>,
    pub notice: Option<String>,
    pub error: Option<String>,
}

/// A sent mail.
pub struct MailRow {
    pub created: String,
    pub created_at_millis: i64,
    pub to: String,
    pub subject: String,
    pub template: String,
    pub status: String,
}

impl MailRow {
    pub fn of(m: &Value) -> Self {
        let created_at_millis = m["created_at_millis"].as_i64().unwrap_or_default();
        let text = |k: &str| match &m[k] {
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            _ => String::new(),
        };
        Self {
            created: latchkey_shared::clock::iso8601_millis(created_at_millis),
            created_at_millis,
            to: text("to"),
            subject: text("subject"),
            template: text("template"),
            status: text("status"),
        }
    }
}

#[derive(Template)]
#[template(path = "console/mail.html")]
pub struct Mail {
    pub nav: Option<Nav>,
    pub mails: Vec<MailRow>,
}

/// A permission definition.
pub struct DefinitionRow {
    pub id: String,
    pub description: String,
    pub contains: String,
    /// `$…` ids are the system's own and cannot be deleted.
    pub system: bool,
}

impl DefinitionRow {
    pub fn of(d: &Value) -> Self {
        let id = d["id"].as_str().unwrap_or_default().to_owned();
        Self {
            system: id.starts_with('$'),
            description: d["description"].as_str().unwrap_or_default().to_owned(),
            contains: d["contained_permission_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            id,
        }
    }
}

/// The definitions of one scope, with its form as sent.
pub struct ScopeView {
    pub name: &'static str,
    pub title: &'static str,
    pub definitions: Vec<DefinitionRow>,
    pub sent_id: String,
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "console/permissions.html")]
pub struct Permissions {
    pub nav: Option<Nav>,
    pub csrf: String,
    pub scopes: Vec<ScopeView>,
    pub notice: Option<String>,
}
