//! The admin console (`/console`, README "Admin console"): server-rendered pages for a
//! project's operators, signed in with the project's admin key. Every page reads and writes
//! through the same functions, and so the same gRPC calls, as the admin REST routes; the
//! console adds no other way to reach the data. Requests count in the project's
//! `server_general` rate-limit bucket; every state-changing form carries the session's CSRF
//! token; pages are sent with a Content-Security-Policy that allows only the gateway's own
//! script and style and no framing.

mod oauth;
mod pages;
mod permissions;
mod project;
mod session;
pub mod store;
mod teams;
mod users;
mod webhooks;

use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::header::{
    CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Form, Router};
use latchkey_proto::auth::v1::AccessOutcome;
use latchkey_shared::crypto::{constant_time_eq, hash_secret};
use latchkey_shared::headers::AccessType;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::routes::internal;
use crate::state::AppState;
use pages::{page, redirect, Confirm, KeyRow, Keys, Nav, SignIn};
use session::{Session, SignedIn};

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const KEY_SET: pages::Thing = pages::Thing {
    section: "keys",
    what: "key set",
    back: "/console/keys",
};

/// An id from a console path in the API's spelling, or None when it is not a UUID.
fn uuid_param(text: &str) -> Option<String> {
    uuid::Uuid::parse_str(text).ok().map(|u| u.to_string())
}

/// The double-submit cookie that protects the sign-in form, which no session covers yet.
const SIGN_IN_CSRF: &str = "latchkey_console_csrf";

pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/console", get(home))
        .route("/console/sign-in", get(sign_in_page).post(sign_in))
        .route("/console/sign-out", post(sign_out))
        .route("/console/switch", post(switch))
        .route("/console/project", get(project::show).post(project::save))
        .route("/console/project/test-mail", post(project::send_test_mail))
        .route(
            "/console/project/oauth",
            get(oauth::new_form).post(oauth::add),
        )
        .route(
            "/console/project/oauth/{id}",
            get(oauth::edit_form).post(oauth::update),
        )
        .route(
            "/console/project/oauth/{id}/remove",
            get(oauth::confirm_remove).post(oauth::remove),
        )
        .route("/console/keys", get(keys_page).post(create_keys))
        .route(
            "/console/keys/{id}/revoke",
            get(confirm_revoke).post(revoke_key),
        )
        .route("/console/users", get(users::list))
        .route("/console/users/{id}", get(users::show))
        .route("/console/users/{id}/metadata", post(users::save_metadata))
        .route(
            "/console/users/{id}/sessions/{session_id}/revoke",
            post(users::revoke_session),
        )
        .route(
            "/console/users/{id}/sessions/revoke-all",
            post(users::revoke_all_sessions),
        )
        .route(
            "/console/users/{id}/delete",
            get(users::confirm_delete).post(users::delete),
        )
        .route("/console/teams", get(teams::list))
        .route("/console/teams/{id}", get(teams::show))
        .route("/console/teams/{id}/members", post(teams::add_member))
        .route(
            "/console/teams/{id}/members/{user_id}/remove",
            get(teams::confirm_remove).post(teams::remove_member),
        )
        .route("/console/permissions", get(permissions::list))
        .route("/console/permissions/{scope}", post(permissions::define))
        .route(
            "/console/permissions/{scope}/{id}/delete",
            get(permissions::confirm_delete).post(permissions::delete),
        )
        .route("/console/webhooks", get(webhooks::list).post(webhooks::add))
        .route("/console/webhooks/{id}", get(webhooks::show))
        .route("/console/webhooks/{id}/test", post(webhooks::send_test))
        .route(
            "/console/webhooks/{id}/rotate",
            get(webhooks::confirm_rotate).post(webhooks::rotate),
        )
        .route(
            "/console/webhooks/{id}/deliveries/{message_id}/replay",
            post(webhooks::replay),
        )
        .route("/console/mail", get(webhooks::mail))
        .route("/console/assets/console.css", get(css))
        .route("/console/assets/console.js", get(js))
        .route_layer(from_fn_with_state(state.clone(), crate::limits::enforce))
        .route_layer(from_fn_with_state(state, with_session))
        .layer(from_fn(security_headers))
}

async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// The request's console session, if it has a live one.
#[derive(Clone)]
struct Current(Option<(String, Session)>);

/// Loads the session and records its access (admin of the current project), so the rate
/// limiter counts the request in that project's `server_general` bucket.
async fn with_session(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    let loaded = session::load(&app, session::id_of(request.headers())).await;
    let request_id = request
        .extensions()
        .get::<crate::request_id::RequestId>()
        .map(|r| r.0.clone());
    let access = loaded.as_ref().map(|(_, s)| s.access(request_id));
    crate::access::mark(&mut request, access);
    request.extensions_mut().insert(Current(loaded));
    next.run(request).await
}

/// What a signed-in page needs: the session id and the session.
pub(crate) struct Signed(String, Session);

/// Why a console request is turned away before its handler's work.
pub(crate) enum Refusal {
    /// No session: to the sign-in page.
    SignedOut,
    /// A state-changing form without the session's CSRF token.
    Csrf,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::SignedOut => redirect("/console/sign-in"),
            Self::Csrf => (
                StatusCode::FORBIDDEN,
                "The form was not sent from this console page (CSRF token missing or wrong). Reload the page and try again.",
            )
                .into_response(),
        }
    }
}

/// A signed-in page: the request's live session, or to the sign-in page.
impl<S: Send + Sync> FromRequestParts<S> for Signed {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Refusal> {
        parts
            .extensions
            .get::<Current>()
            .and_then(|c| c.0.clone())
            .map(|(id, s)| Signed(id, s))
            .ok_or(Refusal::SignedOut)
    }
}

/// A form that carries a CSRF token.
pub(crate) trait CsrfForm {
    fn csrf(&self) -> Option<&str>;
}

impl CsrfForm for Vec<(String, String)> {
    fn csrf(&self) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k == "csrf")
            .map(|(_, v)| v.as_str())
    }
}

/// A state-changing form of a signed-in page, whose CSRF token matched the session's.
pub(crate) struct Posted<T>(Signed, T);

impl<S: Send + Sync, T: DeserializeOwned + CsrfForm + Send> FromRequest<S> for Posted<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let signed = Signed::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Form(form) = Form::<T>::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        match form.csrf() {
            Some(t) if signed.1.csrf_matches(t) => Ok(Posted(signed, form)),
            _ => Err(Refusal::Csrf.into_response()),
        }
    }
}

macro_rules! csrf_form {
    ($($form:ty),*) => {$(
        impl $crate::console::CsrfForm for $form {
            fn csrf(&self) -> Option<&str> {
                self.csrf.as_deref()
            }
        }
    )*};
}
pub(crate) use csrf_form;

csrf_form!(CsrfOnly, SwitchForm, CreateForm);

async fn home(Extension(current): Extension<Current>) -> Response {
    match current.0 {
        Some(_) => redirect("/console/project"),
        None => redirect("/console/sign-in"),
    }
}

fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_owned())
}

fn sign_in_form(
    current: &Current,
    headers: &HeaderMap,
    status: StatusCode,
    project_id: String,
    error: Option<String>,
) -> Response {
    let csrf = cookie_value(headers, SIGN_IN_CSRF).unwrap_or_else(session::new_csrf);
    let nav = current.0.as_ref().map(|(_, s)| Nav::of(s, "sign-in"));
    let mut response = page(
        status,
        &SignIn {
            nav,
            csrf: csrf.clone(),
            project_id,
            error,
        },
    );
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{SIGN_IN_CSRF}={csrf}; Path=/console; HttpOnly; SameSite=Strict"
    )) {
        session::set_cookie(response.headers_mut(), v);
    }
    response
}

async fn sign_in_page(Extension(current): Extension<Current>, headers: HeaderMap) -> Response {
    sign_in_form(&current, &headers, StatusCode::OK, String::new(), None)
}

#[derive(Deserialize)]
struct SignInForm {
    csrf: Option<String>,
    project_id: String,
    admin_key: String,
}

/// Checks the admin key once, then keeps only its hash in the session (a new one, or the
/// browser's existing session, which gains the project and switches to it).
async fn sign_in(
    State(app): State<AppState>,
    Extension(current): Extension<Current>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let expected = cookie_value(&headers, SIGN_IN_CSRF);
    let csrf_ok = matches!((&expected, &form.csrf), (Some(e), Some(s)) if constant_time_eq(e, s));
    if !csrf_ok {
        return Refusal::Csrf.into_response();
    }
    let refuse = |message: &str| {
        sign_in_form(
            &current,
            &headers,
            StatusCode::UNAUTHORIZED,
            form.project_id.clone(),
            Some(message.to_owned()),
        )
    };
    let Some(project_id) = pages::parse_project(&form.project_id) else {
        return refuse("That is not a project id (a UUID).");
    };
    let key_sha256 = hash_secret(form.admin_key.trim());
    let outcome = app
        .access
        .check_hash(project_id, AccessType::Admin, &key_sha256)
        .await;
    match outcome {
        Ok(AccessOutcome::Granted) => {}
        Ok(_) => return refuse("No such project, or the key is not one of its live admin keys."),
        Err(_) => return refuse("The auth service did not answer; try again in a moment."),
    }
    let mut probe = Session {
        csrf: String::new(),
        current: project_id,
        projects: Vec::new(),
        stored_at_millis: 0,
    };
    let name = match app
        .auth
        .clone()
        .get_current_project(
            probe
                .access(None)
                .request(latchkey_proto::auth::v1::Empty {}),
        )
        .await
    {
        Ok(p) => p.into_inner().display_name,
        Err(_) => project_id.to_string(),
    };
    let (id, mut session) = match current.0.clone() {
        Some((id, s)) => (id, s),
        None => (session::new_id(), {
            probe.csrf = session::new_csrf();
            probe
        }),
    };
    session.projects.retain(|p| p.project_id != project_id);
    session.projects.push(SignedIn {
        project_id,
        name,
        key_sha256,
    });
    session.current = project_id;
    if session::save(&app, &id, &session).await.is_err() {
        return refuse("Sessions cannot be stored right now; try again in a moment.");
    }
    let mut response = redirect("/console/project");
    session::set_cookie(response.headers_mut(), session::cookie(&app, Some(&id)));
    response
}

#[derive(Deserialize)]
struct CsrfOnly {
    csrf: Option<String>,
}

async fn sign_out(
    State(app): State<AppState>,
    Posted(Signed(id, _), _): Posted<CsrfOnly>,
) -> Response {
    session::end(&app, &id).await;
    let mut response = redirect("/console/sign-in");
    session::set_cookie(response.headers_mut(), session::cookie(&app, None));
    response
}

#[derive(Deserialize)]
struct SwitchForm {
    csrf: Option<String>,
    project_id: String,
}

/// Switches to another project the browser signed in to; any other id is refused.
async fn switch(
    State(app): State<AppState>,
    Posted(Signed(id, mut session), form): Posted<SwitchForm>,
) -> Response {
    let target = pages::parse_project(&form.project_id);
    if !session
        .projects
        .iter()
        .any(|p| Some(p.project_id) == target)
    {
        return (
            StatusCode::FORBIDDEN,
            "This browser has not signed in to that project; sign in with its admin key.",
        )
            .into_response();
    }
    if let Some(target) = target {
        session.current = target;
    }
    let _ = session::save(&app, &id, &session).await;
    redirect("/console/project")
}

async fn keys_page(State(app): State<AppState>, Signed(_, session): Signed) -> Response {
    keys_view(&app, &session, StatusCode::OK, None, None).await
}

async fn keys_view(
    app: &AppState,
    session: &Session,
    status: StatusCode,
    created: Option<Vec<(String, String)>>,
    error: Option<String>,
) -> Response {
    match internal::key_sets(app, &session.access(None)).await {
        Ok(keys) => page(
            status,
            &Keys {
                csrf: session.csrf.clone(),
                nav: Some(Nav::of(session, "keys")),
                keys: keys.iter().map(KeyRow::of).collect(),
                created,
                error,
            },
        ),
        Err(e) => e.into_response(),
    }
}

#[derive(Deserialize)]
struct CreateForm {
    csrf: Option<String>,
    description: String,
    client: Option<String>,
    server: Option<String>,
    admin: Option<String>,
}

async fn create_keys(
    State(app): State<AppState>,
    Posted(Signed(_, session), form): Posted<CreateForm>,
) -> Response {
    let body = internal::CreateApiKey {
        description: form.description,
        expires_at_millis: None,
        has_publishable_client_key: form.client.is_some(),
        has_secret_server_key: form.server.is_some(),
        has_super_secret_admin_key: form.admin.is_some(),
    };
    match internal::create_key_set(&app, &session.access(None), body).await {
        Ok(created) => {
            let shown: Vec<(String, String)> = [
                ("Publishable client key", "publishable_client_key"),
                ("Secret server key", "secret_server_key"),
                ("Super-secret admin key", "super_secret_admin_key"),
            ]
            .into_iter()
            .filter_map(|(label, field)| {
                created[field]
                    .as_str()
                    .map(|k| (label.to_owned(), k.to_owned()))
            })
            .collect();
            keys_view(&app, &session, StatusCode::CREATED, Some(shown), None).await
        }
        Err(e) => {
            let message = e.0.message.clone();
            keys_view(&app, &session, StatusCode::BAD_REQUEST, None, Some(message)).await
        }
    }
}

/// Revocation is confirmed on a page of its own, so it works without script.
async fn confirm_revoke(
    State(app): State<AppState>,
    Signed(_, session): Signed,
    Path(id): Path<String>,
) -> Response {
    let Some(id) = uuid_param(&id) else {
        return redirect("/console/keys");
    };
    let found = internal::key_sets(&app, &session.access(None)).await;
    let found = found.map(|keys| keys.iter().any(|k| k["id"] == id.as_str()));
    if let Some(refusal) = pages::unless_found(found, &session, &KEY_SET) {
        return refusal;
    }
    page(
        StatusCode::OK,
        &Confirm {
            csrf: session.csrf.clone(),
            nav: Some(Nav::of(&session, "keys")),
            question: "Revoke this key set?".into(),
            consequence: format!(
                "Every key of set {id} stops working at once, on every gateway within seconds. \
                 This cannot be undone. If this console signed in with one of its keys, the \
                 console session ends too."
            ),
            action: format!("/console/keys/{id}/revoke"),
            confirm: "Revoke",
            back: "/console/keys",
        },
    )
}

async fn revoke_key(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Posted(Signed(_, session), _): Posted<CsrfOnly>,
) -> Response {
    let access = session.access(None);
    match internal::update_key_set(&app, &access, id, None, Some(true)).await {
        Ok(_) => redirect("/console/keys"),
        Err(e) => {
            let message = e.0.message.clone();
            keys_view(&app, &session, StatusCode::BAD_REQUEST, None, Some(message)).await
        }
    }
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/console.js"),
    )
}
