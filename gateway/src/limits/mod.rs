//! Rate limits (70 §7, DESIGN §6): each request is counted in the buckets it belongs to, with
//! one atomic Redis call shared by every gateway, or this gateway's counters in embedded mode
//! and while Redis cannot answer. On top of the per-IP buckets, wrong passwords at sign-in are
//! limited per account and per (account, IP), keyed on the address as typed so unknown
//! addresses behave exactly like known ones: each sign-in is counted before it is evaluated
//! (a full bucket refuses it before any hashing), and once its answer is known a correct
//! password takes its count back and clears the (account, IP) counter.

pub mod client_ip;
mod local;
mod redis;

pub use self::redis::delete_prefix;
use self::redis::Settle;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::access::Access;
use crate::error::ApiError;
use crate::state::{AppState, AuthClient};
pub use client_ip::Net;

/// How long a project's limits are reused without news of a change. Changes made through the
/// REST API are in force at once on every gateway (the writer forgets its copy and records the
/// new settings version in Redis, which every count checks); this bounds only changes made
/// around the gateways (auth's gRPC API called directly) and changes while Redis is down.
const SETTINGS_TTL: Duration = Duration::from_secs(2);

/// Client routes that authenticate, check codes or mail (70 §7.1 `client_auth_sensitive`).
const AUTH_SENSITIVE: &[&str] = &[
    "/api/v1/auth/password/sign-up",
    "/api/v1/auth/password/sign-in",
    "/api/v1/auth/password/update",
    "/api/v1/auth/password/set",
    "/api/v1/auth/password/send-reset-code",
    "/api/v1/auth/password/reset",
    "/api/v1/auth/password/reset/check-code",
    "/api/v1/auth/otp/send-sign-in-code",
    "/api/v1/auth/otp/sign-in",
    "/api/v1/auth/otp/sign-in/check-code",
    "/api/v1/auth/mfa/sign-in",
    "/api/v1/auth/anonymous/sign-up",
    "/api/v1/auth/passkey/initiate-passkey-registration",
    "/api/v1/auth/passkey/register",
    "/api/v1/auth/passkey/initiate-passkey-authentication",
    "/api/v1/auth/passkey/sign-in",
    // Counted per project, client address and route: the SDK polls every 2 s, so one address
    // (a NAT, a CI runner) can poll for three CLIs at once within the default 100 a minute.
    "/api/v1/auth/cli",
    "/api/v1/auth/cli/poll",
    "/api/v1/auth/cli/complete",
    "/api/v1/contact-channels/verify",
    "/api/v1/contact-channels/verify/check-code",
    "/api/v1/contact-channels/send-verification-code",
    "/api/v1/contact-channels/{user_id}/{contact_channel_id}/send-verification-code",
    "/api/v1/team-invitations/send-code",
    "/api/v1/team-invitations/accept",
    "/api/v1/team-invitations/accept/details",
    "/api/v1/team-invitations/accept/check-code",
];

/// Routes that send mail, with the body field naming the recipient (None: the path names it).
const EMAIL_SENDING: &[(&str, Option<&str>)] = &[
    ("/api/v1/auth/password/sign-up", Some("email")),
    ("/api/v1/auth/password/send-reset-code", Some("email")),
    ("/api/v1/auth/otp/send-sign-in-code", Some("email")),
    (
        "/api/v1/contact-channels/send-verification-code",
        Some("email"),
    ),
    (
        "/api/v1/contact-channels/{user_id}/{contact_channel_id}/send-verification-code",
        None,
    ),
    ("/api/v1/team-invitations/send-code", Some("email")),
    ("/api/v1/internal/send-test-email", Some("recipient_email")),
    ("/console/project/test-mail", Some("recipient_email")),
];

const SIGN_IN: &str = "/api/v1/auth/password/sign-in";

/// One counter a request increments.
struct Hit {
    key: String,
    limit: u32,
    window_ms: u64,
}

/// A project's effective buckets: `None` = disabled.
type Buckets = HashMap<String, Option<(u32, u32)>>;

/// A project's buckets and the settings version they come from (`None`: the defaults, used
/// without a project or while its settings cannot be read).
#[derive(Clone)]
struct Limits {
    version: Option<i64>,
    buckets: Buckets,
}

/// The project's settings changed since its limits were read: read them again and recount.
struct Stale;

/// Where a request's counts went, so that settling them goes to the same place.
#[derive(Clone, Copy)]
enum Store {
    Redis,
    Local,
}

/// What counting a request decided.
enum Verdict {
    Counted(Store),
    /// A bucket is full: its limit and the seconds until it resets.
    Refused(u32, u64),
}

/// The guess counters a password sign-in was counted in (a disabled bucket has none).
#[derive(Default)]
struct Guesses {
    per_email_and_ip: Option<String>,
    per_email: Option<String>,
}

impl Guesses {
    /// How the counts settle once the answer is known. Only a wrong password (which unknown
    /// addresses also get) stays counted; a correct one (signed in, or a second factor asked
    /// for) clears this client's counter for the address and takes back its count of the
    /// address's; any other answer (invalid input, a service down) was no guess at all.
    fn settle(&self, response: &Response) -> Vec<(String, Settle)> {
        let code = response.extensions().get::<ErrorCode>().copied();
        let correct = match code {
            Some(ErrorCode::EmailPasswordMismatch) => return Vec::new(),
            Some(ErrorCode::MultiFactorAuthenticationRequired) => true,
            Some(_) => false,
            None => response.status().is_success(),
        };
        let pair = if correct {
            Settle::Clear
        } else {
            Settle::Refund
        };
        let mut keys = Vec::new();
        keys.extend(self.per_email_and_ip.clone().map(|k| (k, pair)));
        keys.extend(self.per_email.clone().map(|k| (k, Settle::Refund)));
        keys
    }
}

fn defaults() -> Buckets {
    latchkey_shared::limits::BUCKETS
        .iter()
        .map(|(name, limit, window)| ((*name).to_owned(), Some((*limit, *window))))
        .collect()
}

#[derive(Debug, Clone)]
pub struct RateLimitConfig {
    /// Off for benchmarks and deployments that limit elsewhere.
    pub enabled: bool,
    pub redis_url: Option<String>,
    pub key_prefix: String,
    pub trusted_proxies: Vec<Net>,
}

pub struct RateLimits {
    enabled: bool,
    prefix: String,
    trusted: Vec<Net>,
    redis: Option<redis::RedisCounters>,
    local: local::LocalCounters,
    settings: Mutex<HashMap<Uuid, (Instant, Limits)>>,
    pub limited_total: AtomicU64,
    pub fallback_total: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

impl RateLimitConfig {
    /// Embedded mode: on, counted in this process.
    pub fn local() -> Self {
        Self {
            enabled: true,
            redis_url: None,
            key_prefix: "latchkey:".into(),
            trusted_proxies: Vec::new(),
        }
    }
}

impl RateLimits {
    pub fn new(cfg: RateLimitConfig) -> anyhow::Result<Self> {
        Ok(Self {
            enabled: cfg.enabled,
            prefix: cfg.key_prefix,
            trusted: cfg.trusted_proxies,
            redis: cfg
                .redis_url
                .as_deref()
                .map(redis::RedisCounters::new)
                .transpose()?,
            local: local::LocalCounters::default(),
            settings: Mutex::default(),
            limited_total: AtomicU64::new(0),
            fallback_total: AtomicU64::new(0),
        })
    }

    /// Whether Redis answered the last time it was asked (true without Redis).
    pub fn redis_up(&self) -> bool {
        self.redis
            .as_ref()
            .is_none_or(|r| r.up.load(Ordering::Relaxed))
    }

    /// Prometheus lines: requests refused, fallbacks to local counters, whether Redis answers.
    pub fn render(&self) -> String {
        format!(
            "# HELP latchkey_rate_limited_total Requests answered 429.\n\
             # TYPE latchkey_rate_limited_total counter\n\
             latchkey_rate_limited_total {}\n\
             # HELP latchkey_rate_limit_fallback_total Requests counted locally because Redis did not answer.\n\
             # TYPE latchkey_rate_limit_fallback_total counter\n\
             latchkey_rate_limit_fallback_total {}\n\
             # HELP latchkey_rate_limit_redis_up Whether Redis answered the last rate-limit call.\n\
             # TYPE latchkey_rate_limit_redis_up gauge\n\
             latchkey_rate_limit_redis_up {}\n",
            self.limited_total.load(Ordering::Relaxed),
            self.fallback_total.load(Ordering::Relaxed),
            u8::from(self.redis_up()),
        )
    }

    /// A settings write through this gateway answered: from now on every gateway reads the
    /// project's limits again before counting (the version goes to Redis before the answer).
    pub async fn settings_changed(&self, project: Uuid, version: i64) {
        self.forget(project);
        if let Some(r) = &self.redis {
            if r.count((&self.version_key(project), Some(version)), &[])
                .await
                .is_none()
            {
                tracing::warn!(%project, "Redis is unreachable; other gateways apply the new limits within {SETTINGS_TTL:?}");
            }
        }
    }

    fn forget(&self, project: Uuid) {
        if let Ok(mut cache) = self.settings.lock() {
            cache.remove(&project);
        }
    }

    fn version_key(&self, project: Uuid) -> String {
        format!("{}settings:{project}", self.prefix)
    }

    async fn limits(&self, auth: &AuthClient, project: Uuid) -> Limits {
        if let Ok(cache) = self.settings.lock() {
            if let Some((at, limits)) = cache.get(&project) {
                if at.elapsed() < SETTINGS_TTL {
                    return limits.clone();
                }
            }
        }
        let ctx = Context {
            project_id: project,
            access_type: AccessType::Admin,
            user_id: None,
            request_id: None,
        };
        let fetched = auth
            .clone()
            .get_internal_settings(ctx.request(pb::Empty {}))
            .await;
        let limits = match fetched {
            Ok(s) => {
                let s = s.into_inner();
                Limits {
                    version: Some(s.version),
                    buckets: parse_buckets(&s.json),
                }
            }
            // Settings unreachable: the defaults still protect; the request is not failed.
            Err(e) => {
                tracing::warn!(%project, error = %e, "project limits unavailable; using defaults");
                return Limits {
                    version: None,
                    buckets: defaults(),
                };
            }
        };
        if let Ok(mut cache) = self.settings.lock() {
            cache.insert(project, (Instant::now(), limits.clone()));
        }
        limits
    }

    fn hit(&self, buckets: &Buckets, bucket: &str, subject: &str, now: u64) -> Option<Hit> {
        let (limit, window_s) = (*buckets.get(bucket)?)?;
        Some(self.fixed(bucket, subject, limit, window_s, now))
    }

    fn fixed(&self, bucket: &str, subject: &str, limit: u32, window_s: u32, now: u64) -> Hit {
        let window_ms = u64::from(window_s.max(1)) * 1000;
        let start = now - now % window_ms;
        Hit {
            // The window length is part of the key: a limit changed mid-window must not share
            // a counter whose start happens to coincide (the first minute of an hour).
            key: format!("{}{bucket}:{subject}:{window_s}:{start}", self.prefix),
            limit,
            window_ms,
        }
    }

    /// Counts the request in its hits, unless one is full: then the full one with the longest
    /// wait. `Stale` when `project`'s limits are older than its settings: nothing was counted.
    async fn count(
        &self,
        project: Option<(Uuid, &Limits)>,
        hits: &[Hit],
        now: u64,
    ) -> Result<Verdict, Stale> {
        let version = project.and_then(|(p, l)| l.version.map(|v| (p, v)));
        if hits.is_empty() && version.is_none() {
            return Ok(Verdict::Counted(Store::Local));
        }
        let remote: Vec<(String, u64, u64)> = hits
            .iter()
            .map(|h| (h.key.clone(), u64::from(h.limit), h.window_ms))
            .collect();
        let checked = match (&self.redis, version) {
            (Some(r), Some((p, v))) => r.count((&self.version_key(p), Some(v)), &remote).await,
            (Some(r), None) => r.count(("", None), &remote).await,
            (None, _) => None,
        };
        let (store, counted, counts) = match checked {
            Some(redis::Counted::Yes(counts)) => (Store::Redis, true, counts),
            Some(redis::Counted::No(counts)) => (Store::Redis, false, counts),
            Some(redis::Counted::Stale) => return Err(Stale),
            None => {
                if self.redis.is_some() {
                    self.fallback_total.fetch_add(1, Ordering::Relaxed);
                }
                let (counted, counts) = self.local.count(&expiring(&remote, now), now);
                (Store::Local, counted, counts)
            }
        };
        if counted {
            return Ok(Verdict::Counted(store));
        }
        let full = hits
            .iter()
            .zip(counts)
            .filter(|(h, n)| *n >= u64::from(h.limit))
            .map(|(h, _)| {
                let reset_ms = h.window_ms - now % h.window_ms;
                (h.limit, reset_ms.div_ceil(1000).max(1))
            })
            .max_by_key(|(_, retry)| *retry);
        // Counts that were short of every limit yet not counted cannot happen; count as passed.
        Ok(full.map_or(Verdict::Counted(store), |(limit, retry)| {
            Verdict::Refused(limit, retry)
        }))
    }

    /// Settles counts made in `store`; when Redis cannot answer now, the counts stay (the
    /// safe side) and this gateway's own copy is settled.
    async fn settle(&self, store: Store, keys: &[(String, Settle)]) {
        if keys.is_empty() {
            return;
        }
        match (store, &self.redis) {
            (Store::Redis, Some(r)) => {
                if !r.settle(keys).await {
                    tracing::warn!(
                        "a password guess could not be settled in Redis; it stays counted"
                    );
                }
            }
            _ => self.local.settle(keys),
        }
    }
}

fn expiring(keys: &[(String, u64, u64)], now: u64) -> Vec<(String, u64, u64)> {
    keys.iter()
        .map(|(k, l, w)| (k.clone(), *l, now + w))
        .collect()
}

fn parse_buckets(settings_json: &str) -> Buckets {
    let doc: Value = serde_json::from_str(settings_json).unwrap_or_default();
    let mut buckets = defaults();
    if let Some(map) = doc["rate_limits"].as_object() {
        for (name, v) in map {
            let limit = v["limit"].as_u64().and_then(|l| u32::try_from(l).ok());
            let window = v["window_seconds"]
                .as_u64()
                .and_then(|w| u32::try_from(w).ok());
            buckets.insert(name.clone(), limit.zip(window));
        }
    }
    buckets
}

/// The 429 of 70 §7.2, without the known-error headers (80 §11.20).
fn limited(limit: u32, retry_after: u64) -> Response {
    let body = json!({
        "code": "RATE_LIMITED",
        "error": "Too many requests; try again later.",
        "details": { "retry_after_seconds": retry_after },
    });
    let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
    let h = response.headers_mut();
    let num =
        |n: u64| HeaderValue::from_str(&n.to_string()).unwrap_or(HeaderValue::from_static("1"));
    h.insert("retry-after", num(retry_after));
    h.insert("ratelimit-limit", num(u64::from(limit)));
    h.insert("ratelimit-remaining", HeaderValue::from_static("0"));
    h.insert("ratelimit-reset", num(retry_after));
    response
}

/// A field of the body, read as the handler will read it (JSON or a form), so that no encoding
/// slips past the per-account and per-recipient counters.
fn body_field(content_type: Option<&str>, body: &[u8], field: &str) -> Option<String> {
    let v = crate::extract::parse_body(content_type, body).ok()?;
    v.get(field)?.as_str().map(|s| s.trim().to_lowercase())
}

/// Middleware (after access validation): counts the request and answers 429 when over.
pub async fn enforce(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let limits = &app.limits;
    if !limits.enabled || request.method() == Method::OPTIONS {
        return next.run(request).await;
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([127, 0, 0, 1]), |c| c.0.ip());
    // Proxies may append their own header line; all lines together form the chain.
    let forwarded: Vec<&str> = request
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let forwarded = (!forwarded.is_empty()).then(|| forwarded.join(","));
    let ip = client_ip::subject(client_ip::client_ip(
        peer,
        forwarded.as_deref(),
        &limits.trusted,
    ));
    let path = request.uri().path().to_owned();
    let content_type = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let access = crate::access::of_request(&request).cloned();
    let now = now_ms();

    let email_field = EMAIL_SENDING
        .iter()
        .find(|(r, _)| *r == route)
        .map(|(_, f)| *f);
    let needs_body = email_field.flatten().is_some() || route == SIGN_IN;
    let (request, body) = if needs_body {
        let (parts, body) = request.into_parts();
        match axum::body::to_bytes(body, app.config.max_body_bytes).await {
            Ok(bytes) => (
                Request::from_parts(parts, Body::from(bytes.clone())),
                Some(bytes),
            ),
            Err(_) => return ApiError::too_large().into_response(),
        }
    } else {
        (request, None)
    };

    let target = Target {
        route: &route,
        path: &path,
        ip: &ip,
        content_type: content_type.as_deref(),
        body: body.as_deref(),
    };
    // A second try only after the first found the limits stale; it reads them afresh from auth
    // and so needs no second check (which could otherwise repeat if Redis ever held a version
    // from a restored database).
    for check_version in [true, false] {
        let (outcome, guesses) = match &access {
            None => {
                let hits: Vec<Hit> = limits
                    .hit(&defaults(), "unauthenticated", &ip, now)
                    .into_iter()
                    .collect();
                (limits.count(None, &hits, now).await, Guesses::default())
            }
            Some(access) => {
                let project = access.project_id;
                let project_limits = limits.limits(&app.auth, project).await;
                let (hits, guesses) = hits_for(
                    access,
                    &target,
                    email_field,
                    &project_limits.buckets,
                    limits,
                    now,
                );
                let checked = check_version.then_some((project, &project_limits));
                (limits.count(checked, &hits, now).await, guesses)
            }
        };
        match outcome {
            Ok(Verdict::Counted(store)) => {
                let response = next.run(request).await;
                // Before the answer leaves, so the client's next sign-in sees the settled count.
                limits.settle(store, &guesses.settle(&response)).await;
                return response;
            }
            Ok(Verdict::Refused(limit, retry_after)) => {
                limits.limited_total.fetch_add(1, Ordering::Relaxed);
                return limited(limit, retry_after);
            }
            Err(Stale) => {
                if let Some(access) = &access {
                    limits.forget(access.project_id);
                }
            }
        }
    }
    // Not reached: the unchecked second count is never stale.
    next.run(request).await
}

/// What a request is aimed at, for keying its counters.
struct Target<'a> {
    route: &'a str,
    path: &'a str,
    ip: &'a str,
    content_type: Option<&'a str>,
    body: Option<&'a [u8]>,
}

fn hits_for(
    access: &Access,
    t: &Target<'_>,
    email_field: Option<Option<&str>>,
    buckets: &Buckets,
    limits: &RateLimits,
    now: u64,
) -> (Vec<Hit>, Guesses) {
    let (route, ip, body) = (t.route, t.ip, t.body);
    let project = access.project_id;
    let mut hits = Vec::new();
    if access.access_type == AccessType::Client {
        hits.extend(limits.hit(buckets, "client_general", &format!("{project}:{ip}"), now));
        if AUTH_SENSITIVE.contains(&route) {
            let subject = format!("{project}:{ip}:{route}");
            hits.extend(limits.hit(buckets, "client_auth_sensitive", &subject, now));
        }
    } else {
        hits.extend(limits.hit(buckets, "server_general", &project.to_string(), now));
    }
    if let Some(field) = email_field {
        let recipient = match field {
            Some(f) => body.and_then(|b| body_field(t.content_type, b, f)),
            // The channel in the path is the recipient.
            None => Some(t.path.to_owned()),
        };
        if let Some(recipient) = recipient {
            hits.extend(limits.hit(
                buckets,
                "email_sending",
                &format!("{project}:{recipient}"),
                now,
            ));
        }
    }
    let mut guesses = Guesses::default();
    if route == SIGN_IN {
        if let Some(account) = body.and_then(|b| body_field(t.content_type, b, "email")) {
            let mut guess = |bucket: &str, subject: String| {
                let hit = limits.hit(buckets, bucket, &subject, now)?;
                let key = hit.key.clone();
                hits.push(hit);
                Some(key)
            };
            guesses.per_email_and_ip = guess(
                "password_guesses_per_email_and_ip",
                format!("{project}:{account}:{ip}"),
            );
            guesses.per_email = guess("password_guesses_per_email", format!("{project}:{account}"));
        }
    }
    (hits, guesses)
}
