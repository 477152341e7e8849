//! A small OpenID Connect provider on loopback, written for the tests: discovery, an
//! authorization endpoint that "signs in" whoever the test chose and redirects straight back,
//! a token endpoint that checks the client, the redirect URI and PKCE, and userinfo.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{json, Value};

pub const CLIENT_ID: &str = "test-client";
pub const CLIENT_SECRET: &str = "test-client-secret";

/// Who signs in at the provider next.
#[derive(Debug, Clone)]
pub struct Identity {
    pub sub: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: String,
}

impl Identity {
    pub fn new(sub: &str, email: &str, verified: bool) -> Self {
        Self {
            sub: sub.to_owned(),
            email: Some(email.to_owned()),
            email_verified: verified,
            name: format!("Person {sub}"),
        }
    }
}

#[derive(Default)]
struct Inner {
    next: Mutex<Option<Identity>>,
    deny: Mutex<bool>,
    codes: Mutex<HashMap<String, (Identity, String, String)>>,
    tokens: Mutex<HashMap<String, Identity>>,
    refresh_tokens: Mutex<HashMap<String, Identity>>,
    refreshes: AtomicUsize,
    expires_in: AtomicI64,
}

#[derive(Clone)]
pub struct MockProvider {
    pub issuer: String,
    inner: Arc<Inner>,
}

fn random() -> String {
    latchkey_shared::crypto::random_base32(24)
}

impl MockProvider {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let inner = Arc::new(Inner::default());
        inner.expires_in.store(3600, Ordering::SeqCst);
        let issuer = format!("http://{addr}");
        let provider = Self { issuer, inner };
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/userinfo", get(userinfo))
            .with_state(provider.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        provider
    }

    pub fn sign_in_as(&self, identity: Identity) {
        if let Ok(mut next) = self.inner.next.lock() {
            *next = Some(identity);
        }
    }

    /// The next authorization answers `error=access_denied`.
    pub fn deny_next(&self) {
        if let Ok(mut deny) = self.inner.deny.lock() {
            *deny = true;
        }
    }

    /// Lifetime of the access tokens issued from now on.
    pub fn set_expires_in(&self, seconds: i64) {
        self.inner.expires_in.store(seconds, Ordering::SeqCst);
    }

    pub fn refreshes(&self) -> usize {
        self.inner.refreshes.load(Ordering::SeqCst)
    }
}

async fn discovery(State(p): State<MockProvider>) -> Json<Value> {
    Json(json!({
        "issuer": p.issuer,
        "authorization_endpoint": format!("{}/authorize", p.issuer),
        "token_endpoint": format!("{}/token", p.issuer),
        "userinfo_endpoint": format!("{}/userinfo", p.issuer),
    }))
}

async fn authorize(
    State(p): State<MockProvider>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let field = |k: &str| q.get(k).cloned().unwrap_or_default();
    if field("client_id") != CLIENT_ID || field("code_challenge_method") != "S256" {
        return (StatusCode::BAD_REQUEST, "bad client or PKCE").into_response();
    }
    let redirect = field("redirect_uri");
    let state = field("state");
    let denied = p
        .inner
        .deny
        .lock()
        .map(|mut d| std::mem::take(&mut *d))
        .unwrap_or(false);
    let sep = if redirect.contains('?') { '&' } else { '?' };
    if denied {
        return Redirect::to(&format!("{redirect}{sep}error=access_denied&state={state}"))
            .into_response();
    }
    let Some(identity) = p.inner.next.lock().ok().and_then(|n| n.clone()) else {
        return (StatusCode::BAD_REQUEST, "nobody to sign in").into_response();
    };
    let code = random();
    if let Ok(mut codes) = p.inner.codes.lock() {
        codes.insert(
            code.clone(),
            (identity, redirect.clone(), field("code_challenge")),
        );
    }
    let target = reqwest::Url::parse_with_params(&redirect, &[("code", &code), ("state", &state)])
        .map(String::from)
        .unwrap_or_default();
    Redirect::to(&target).into_response()
}

fn issue(p: &MockProvider, identity: Identity, with_refresh: bool) -> Json<Value> {
    let access = random();
    let refresh = random();
    if let Ok(mut t) = p.inner.tokens.lock() {
        t.insert(access.clone(), identity.clone());
    }
    if with_refresh {
        if let Ok(mut t) = p.inner.refresh_tokens.lock() {
            t.insert(refresh.clone(), identity);
        }
    }
    let mut body = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": p.inner.expires_in.load(Ordering::SeqCst),
        "scope": "openid email profile",
    });
    if with_refresh {
        body["refresh_token"] = json!(refresh);
    }
    Json(body)
}

fn refuse() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": "invalid_grant" })),
    )
        .into_response()
}

async fn token(State(p): State<MockProvider>, Form(f): Form<HashMap<String, String>>) -> Response {
    let field = |k: &str| f.get(k).cloned().unwrap_or_default();
    if field("client_id") != CLIENT_ID || field("client_secret") != CLIENT_SECRET {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "error": "invalid_client" })),
        )
            .into_response();
    }
    match field("grant_type").as_str() {
        "authorization_code" => {
            let Some((identity, redirect, challenge)) = p
                .inner
                .codes
                .lock()
                .ok()
                .and_then(|mut c| c.remove(&field("code")))
            else {
                return refuse();
            };
            let digest =
                ring::digest::digest(&ring::digest::SHA256, field("code_verifier").as_bytes());
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
            if redirect != field("redirect_uri") || computed != challenge {
                return refuse();
            }
            issue(&p, identity, true).into_response()
        }
        "refresh_token" => {
            let identity = p
                .inner
                .refresh_tokens
                .lock()
                .ok()
                .and_then(|t| t.get(&field("refresh_token")).cloned());
            match identity {
                Some(identity) => {
                    p.inner.refreshes.fetch_add(1, Ordering::SeqCst);
                    issue(&p, identity, false).into_response()
                }
                None => refuse(),
            }
        }
        _ => refuse(),
    }
}

async fn userinfo(State(p): State<MockProvider>, headers: HeaderMap) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let Some(identity) = p
        .inner
        .tokens
        .lock()
        .ok()
        .and_then(|t| t.get(token).cloned())
    else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    Json(json!({
        "sub": identity.sub,
        "email": identity.email,
        "email_verified": identity.email_verified,
        "name": identity.name,
        "picture": "https://images.example.com/avatar.png",
    }))
    .into_response()
}
