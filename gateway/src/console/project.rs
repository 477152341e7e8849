//! The console's project page: every setting of `PATCH /internal/project`, with the API's
//! error next to the setting it names, and a test mail sent with the project's mail settings.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::pages::{page, redirect, Field, Nav, Project, ProviderRow, TestMail};
use super::session::Session;
use super::{Posted, Signed};
use crate::routes::internal;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct SavedQuery {
    saved: Option<String>,
}

pub async fn show(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    axum::extract::Query(q): axum::extract::Query<SavedQuery>,
) -> Response {
    match internal::settings(&app, &session.access(None)).await {
        Ok(settings) => view(
            &session,
            StatusCode::OK,
            &settings,
            fields_of(&settings),
            Outcome {
                saved: q.saved.is_some(),
                ..Outcome::default()
            },
        ),
        Err(e) => e.into_response(),
    }
}

/// What the last form on the page did.
#[derive(Default)]
struct Outcome {
    saved: bool,
    general_error: Option<String>,
    test_mail: Option<TestMail>,
}

fn view(
    session: &Session,
    status: StatusCode,
    settings: &Value,
    fields: Vec<Field>,
    outcome: Outcome,
) -> Response {
    let providers = settings["oauth_providers"].as_array().into_iter().flatten();
    page(
        status,
        &Project {
            csrf: session.csrf.clone(),
            nav: Some(Nav::of(session, "project")),
            fields,
            providers: providers.map(ProviderRow::of).collect(),
            saved: outcome.saved,
            general_error: outcome.general_error,
            test_mail: outcome.test_mail,
        },
    )
}

/// Every setting but the OAuth providers, which have forms of their own (`oauth.rs`).
fn fields_of(settings: &Value) -> Vec<Field> {
    settings
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.as_str() != "oauth_providers")
                .map(|(k, v)| Field::of(k, v))
                .collect()
        })
        .unwrap_or_default()
}

/// Sends only the settings whose submitted value differs from the current one, so write-only
/// secrets the page cannot show are never sent back blank.
pub async fn save(
    State(app): State<AppState>,
    Posted(Signed(_, session), form): Posted<Vec<(String, String)>>,
) -> Response {
    let access = session.access(None);
    let settings = match internal::settings(&app, &access).await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let mut fields = fields_of(&settings);
    let mut patch = Map::new();
    for field in &mut fields {
        let sent = form
            .iter()
            .find(|(k, _)| k.strip_prefix("s.") == Some(field.name.as_str()))
            .map(|(_, v)| v.clone());
        // An unticked box sends nothing; the form's `kind.` field says the box was there.
        let shown = form
            .iter()
            .any(|(k, _)| k.strip_prefix("kind.") == Some(field.name.as_str()));
        let value = match (field.kind, sent) {
            ("bool", _) if !shown => continue,
            ("bool", sent) => Value::Bool(sent.as_deref() == Some("true")),
            (_, None) => continue,
            ("number", Some(text)) => match serde_json::from_str::<Value>(text.trim()) {
                Ok(v @ Value::Number(_)) => v,
                _ => {
                    field.error = Some("A number is needed.".into());
                    field.value = text;
                    continue;
                }
            },
            ("string", Some(text)) => Value::String(text),
            (_, Some(text)) => match serde_json::from_str::<Value>(&text) {
                Ok(v) => v,
                Err(e) => {
                    field.error = Some(format!("Not valid JSON: {e}"));
                    field.value = text;
                    continue;
                }
            },
        };
        if settings.get(&field.name) != Some(&value) {
            field.value = Field::of(&field.name, &value).value;
            patch.insert(field.name.clone(), value);
        }
    }
    let refused = |fields, general_error: &str| {
        let outcome = Outcome {
            general_error: Some(general_error.to_owned()),
            ..Outcome::default()
        };
        view(
            &session,
            StatusCode::BAD_REQUEST,
            &settings,
            fields,
            outcome,
        )
    };
    if fields.iter().any(|f| f.error.is_some()) {
        return refused(fields, "Nothing was saved: correct the marked settings.");
    }
    if patch.is_empty() {
        return redirect("/console/project?saved=1");
    }
    match internal::change_settings(&app, &access, &Value::Object(patch)).await {
        Ok(_) => redirect("/console/project?saved=1"),
        Err(e) => {
            let message = e.0.message.clone();
            // The API names the setting it refuses; the message goes next to it.
            match fields
                .iter_mut()
                .find(|f| message.contains(f.name.as_str()))
            {
                Some(f) => {
                    f.error = Some(message);
                    refused(fields, "Nothing was saved: correct the marked setting.")
                }
                None => refused(fields, &message),
            }
        }
    }
}

#[derive(Deserialize)]
pub struct TestMailForm {
    csrf: Option<String>,
    recipient_email: String,
}

super::csrf_form!(TestMailForm);

/// Sends a test mail with the saved mail settings; the mail server's answer is shown beside
/// the form.
pub async fn send_test_mail(
    State(app): State<AppState>,
    Posted(Signed(_, session), form): Posted<TestMailForm>,
) -> Response {
    let access = session.access(None);
    let settings = match internal::settings(&app, &access).await {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let to = form.recipient_email.trim().to_owned();
    let (status, message, sent) = match internal::test_email(&app, &access, to.clone()).await {
        Ok(answer) if answer["success"] == Value::Bool(true) => (
            StatusCode::OK,
            format!("A test mail went to {to}; it is in the mail log."),
            true,
        ),
        Ok(answer) => (
            StatusCode::OK,
            format!(
                "The mail server did not take the test mail: {}",
                answer["error_message"]
                    .as_str()
                    .unwrap_or("no reason given")
            ),
            false,
        ),
        Err(e) => (StatusCode::BAD_REQUEST, e.0.message.clone(), false),
    };
    let outcome = Outcome {
        test_mail: Some(TestMail { to, sent, message }),
        ..Outcome::default()
    };
    view(&session, status, &settings, fields_of(&settings), outcome)
}
