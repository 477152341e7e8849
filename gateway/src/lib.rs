//! Latchkey's HTTP gateway: validates access headers, turns REST calls into gRPC calls on the
//! services and service errors into the JSON envelope. The binary in `main.rs` composes it with
//! the services.

/// Access-header validation, key cache and token verification.
pub mod access;
/// The admin console (`/console`).
pub mod console;
/// The only place HTTP error responses are made.
pub mod error;
/// Strict JSON body and query extractors.
pub mod extract;
/// Request heads timed from their first byte, apart from the idle wait between requests.
mod head_clock;
/// Unread request bodies drained so keep-alive connections stay usable.
mod keep_alive;
/// Rate limits: buckets, Redis and local counters, client addresses.
pub mod limits;
/// Prometheus metrics.
pub mod metrics;
/// The OpenAPI document.
pub mod openapi;
/// Request ids.
pub mod request_id;
/// Route handlers by spec area.
pub mod routes;
/// Shared state: service clients, caches, settings.
pub mod state;
/// The whole system in one process (embedded mode, tests).
pub mod system;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::headers;

pub use error::ApiError;
pub use state::{AppState, GatewayConfig};

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    let max_body = state.config.max_body_bytes;
    Router::new()
        .merge(routes::api(state.clone()))
        .merge(routes::operations())
        .merge(console::routes(state.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(state.clone(), metrics::record))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(from_fn(finalize))
        .layer(from_fn(request_id::assign))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "No such route.")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "This route does not accept that method.",
    )
}

/// The CORS header values every `/api/` answer carries, built once.
struct CorsValues {
    allow_headers: String,
    allow_headers_value: HeaderValue,
    expose_headers_value: HeaderValue,
}

static CORS: std::sync::LazyLock<CorsValues> = std::sync::LazyLock::new(|| {
    let allow_headers = cors_allow_headers();
    let value = |text: &str| HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static(""));
    CorsValues {
        allow_headers_value: value(&allow_headers),
        expose_headers_value: value(&cors_expose_headers()),
        allow_headers,
    }
});

fn cors_allow_headers() -> String {
    let mut names = vec!["content-type".to_owned(), "authorization".to_owned()];
    for h in headers::REQUEST_HEADERS {
        names.extend(headers::all_forms(h));
    }
    names.join(", ")
}

fn cors_expose_headers() -> String {
    let mut names = vec!["content-type".to_owned()];
    for h in [
        headers::ACTUAL_STATUS,
        headers::KNOWN_ERROR,
        headers::REQUEST_ID,
    ] {
        names.extend(headers::all_forms(h));
    }
    names.extend(
        [
            "retry-after",
            "ratelimit-limit",
            "ratelimit-remaining",
            "ratelimit-reset",
        ]
        .map(String::from),
    );
    names.join(", ")
}

/// Applies what every response carries: CORS, `Cache-Control`, the preflight answer, and the
/// override-error-status rule (00 §2).
async fn finalize(request: Request, next: Next) -> Response {
    let is_api = request.uri().path().starts_with("/api/");
    if request.method() == Method::OPTIONS && is_api {
        let mut response = StatusCode::OK.into_response();
        cors(&mut response, true);
        allow_requested_headers(request.headers(), &mut response);
        return response;
    }
    let override_status = headers::present(request.headers(), headers::OVERRIDE_ERROR_STATUS);
    let mut response = next.run(request).await;
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE
        && response.extensions().get::<ErrorCode>().is_none()
    {
        response = ApiError::too_large().into_response();
    }
    if is_api {
        cors(&mut response, false);
    }
    response
        .headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store, max-age=0"));
    if override_status && response.status().is_client_error() {
        let actual = response.status().as_u16().to_string();
        for name in headers::all_forms(headers::ACTUAL_STATUS) {
            if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::from_str(&actual)) {
                response.headers_mut().insert(n, v);
            }
        }
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// The CORS headers of every `/api/` answer (00 §2). Only a preflight's `Allow-Headers` is read
/// by browsers, so an actual answer carries the one-character wildcard the spec allows instead
/// of the list of every access header (1.3 kB on each answer).
fn cors(response: &mut Response, preflight: bool) {
    let h = response.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        if preflight {
            CORS.allow_headers_value.clone()
        } else {
            HeaderValue::from_static("*")
        },
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        CORS.expose_headers_value.clone(),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
}

/// A preflight allows whatever headers the browser asks for (00 §2): browser SDKs add their own
/// (`ngrok-skip-browser-warning`, `baggage`, `sentry-trace`, …) and no `/api/` route reads
/// cookies, so there is nothing to protect by refusing them. Mirroring rather than `*` because the
/// wildcard never covers `Authorization`. The answer varies with the request header, so caches
/// must key on it.
fn allow_requested_headers(request: &HeaderMap, response: &mut Response) {
    let h = response.headers_mut();
    h.append(
        header::VARY,
        HeaderValue::from_static("access-control-request-headers"),
    );
    let asked: Vec<&str> = request
        .get_all(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty() && HeaderName::from_bytes(name.as_bytes()).is_ok())
        .collect();
    if asked.is_empty() {
        return;
    }
    let mut names = CORS.allow_headers.clone();
    for name in asked {
        names.push_str(", ");
        names.push_str(&name.to_ascii_lowercase());
    }
    if let Ok(v) = HeaderValue::from_str(&names) {
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, v);
    }
}

/// A client must send its whole request head within this once it has begun (slow-client
/// protection), and its first head within this of connecting.
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// A keep-alive connection may wait this long for its next request: longer than the idle
/// limits of common proxies and load balancers (60 s), so that they close first and never send
/// on a connection the gateway is closing.
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(75);
/// And its body within this.
const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// At most this many headers, in a head of at most `MAX_HEAD_BYTES`; more answers 431.
const MAX_HEADERS: usize = 100;
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// In-flight requests get this long to finish after shutdown begins.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(25);

/// While draining, HTTP/1 answers carry `Connection: close`, so clients move their keep-alive
/// connections to another gateway before this one stops accepting.
async fn close_when_draining(
    axum::extract::State(app): axum::extract::State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let http1 = request.version() <= axum::http::Version::HTTP_11;
    let mut response = next.run(request).await;
    if http1 && app.draining.load(std::sync::atomic::Ordering::Relaxed) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Serves the gateway on `listener` until `shutdown` resolves, then keeps serving for the
/// configured delay while readiness fails, then stops accepting and finishes in-flight requests.
/// Connections are served by hyper directly so that header count and size and slow clients
/// are bounded before a request reaches the router.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

    let delay = state.config.shutdown_delay;
    let draining = state.clone();
    let shutdown = async move {
        shutdown.await;
        draining
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(?delay, "not ready; draining after the delay");
        tokio::time::sleep(delay).await;
    };
    let app = router(state.clone())
        .layer(from_fn_with_state(state.clone(), close_when_draining))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            BODY_READ_TIMEOUT,
        ))
        .layer(from_fn_with_state(state, keep_alive::drain_unread));
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // hyper times the wait for a head from the end of the last answer: the idle limit.
        .header_read_timeout(IDLE_TIMEOUT)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_HEAD_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD_BYTES as u32);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors and the like: pause rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = tower::ServiceExt::map_request(
            app.clone(),
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                request
            },
        );
        let connection = builder
            .serve_connection_with_upgrades(
                TokioIo::new(head_clock::HeadClock::new(stream, HEADER_READ_TIMEOUT)),
                hyper_util::service::TowerToHyperService::new(service),
            )
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some connections were still open when the drain period ended");
    }
    Ok(())
}
