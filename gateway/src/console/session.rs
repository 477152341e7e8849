//! Console sessions. Signing in with a project's admin key makes a session that remembers the
//! project and only the key's SHA-256; the browser holds a random session id in an HttpOnly,
//! SameSite=Strict cookie (Secure when the public URL is https). Every request checks the key
//! again (through the gateway's key cache), so revoking it ends the session within the cache's
//! lifetime, and every request restarts the idle clock (stored again at most once a minute, so
//! a busy console costs its session store a write a minute, not one per request).

use std::time::Duration;

use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue};
use latchkey_proto::auth::v1::AccessOutcome;
use latchkey_shared::crypto::{constant_time_eq, hash_secret, random_base32};
use latchkey_shared::headers::AccessType;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::access::Access;
use crate::state::AppState;

pub const COOKIE_NAME: &str = "latchkey_console";
/// Sessions end after this long without a request.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
const ID_LEN: usize = 45;
/// How stale the stored idle clock may get: sessions end between `IDLE` and `IDLE` plus this
/// after the last request.
const TOUCH_EVERY_MILLIS: i64 = 60_000;

/// A project the browser signed in to.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SignedIn {
    pub project_id: Uuid,
    pub name: String,
    pub key_sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Session {
    /// Every state-changing form carries it; compared in constant time.
    pub csrf: String,
    pub current: Uuid,
    pub projects: Vec<SignedIn>,
    /// When the session was last stored, which restarted its idle clock.
    #[serde(default)]
    pub stored_at_millis: i64,
}

impl Session {
    pub fn current(&self) -> Option<&SignedIn> {
        self.projects.iter().find(|p| p.project_id == self.current)
    }

    /// The access the console acts with: admin of the current project, as the REST routes'
    /// admin key would give.
    pub fn access(&self, request_id: Option<String>) -> Access {
        Access {
            access_type: AccessType::Admin,
            project_id: self.current,
            user: None,
            request_id,
        }
    }

    pub fn csrf_matches(&self, sent: &str) -> bool {
        constant_time_eq(&self.csrf, sent)
    }
}

/// The session id in the request's cookie, if any.
pub fn id_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
        .filter(|v| v.len() == ID_LEN)
}

pub fn new_id() -> String {
    random_base32(ID_LEN)
}

pub fn new_csrf() -> String {
    random_base32(32)
}

/// The cookie that keeps `id`, or (None) the one that removes it.
pub fn cookie(app: &AppState, id: Option<&str>) -> HeaderValue {
    let secure = if app.config.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    let value = match id {
        Some(id) => format!(
            "{COOKIE_NAME}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            IDLE.as_secs()
        ),
        None => {
            format!("{COOKIE_NAME}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
        }
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

pub fn set_cookie(headers: &mut HeaderMap, value: HeaderValue) {
    headers.append(SET_COOKIE, value);
}

/// Loads the request's session, drops projects whose key no longer works, and restarts the
/// idle clock. None: no session, or nothing left of it.
pub async fn load(app: &AppState, id: Option<String>) -> Option<(String, Session)> {
    let id = id?;
    let key = hash_secret(&id);
    let text = app.console.get(&key).await.ok()??;
    let mut session: Session = serde_json::from_str(&text).ok()?;
    let before = (session.current, session.projects.len());
    let mut kept = Vec::new();
    for p in session.projects.drain(..) {
        let outcome = app
            .access
            .check_hash(p.project_id, AccessType::Admin, &p.key_sha256)
            .await;
        // An auth outage keeps the session; only an answer that the key is gone ends it.
        if !matches!(outcome, Ok(o) if o != AccessOutcome::Granted) {
            kept.push(p);
        }
    }
    session.projects = kept;
    if session.current().is_none() {
        match session.projects.first() {
            Some(p) => session.current = p.project_id,
            None => {
                let _ = app.console.delete(&key).await;
                return None;
            }
        }
    }
    let unchanged = before == (session.current, session.projects.len());
    if !unchanged || now_millis() - session.stored_at_millis >= TOUCH_EVERY_MILLIS {
        save(app, &id, &session).await.ok()?;
    }
    Some((id, session))
}

fn now_millis() -> i64 {
    latchkey_shared::clock::system().now_millis()
}

/// Stores the session, which restarts its idle clock.
pub async fn save(app: &AppState, id: &str, session: &Session) -> anyhow::Result<()> {
    let stored = Session {
        stored_at_millis: now_millis(),
        ..session.clone()
    };
    let text = serde_json::to_string(&stored)?;
    app.console.put(&hash_secret(id), &text, IDLE).await
}

pub async fn end(app: &AppState, id: &str) {
    let _ = app.console.delete(&hash_secret(id)).await;
}
