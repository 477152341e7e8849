//! Request ids: one per request, returned as `X-Service-Request-Id`, logged, and carried to
//! services as gRPC metadata.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

#[derive(Debug, Clone)]
pub struct RequestId(pub String);

pub async fn assign(mut request: Request, next: Next) -> Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    request.extensions_mut().insert(RequestId(id.clone()));
    let span = tracing::info_span!("request", request_id = %id, method = %request.method(), path = %request.uri().path());
    let started = std::time::Instant::now();
    let mut response = tracing::Instrument::instrument(next.run(request), span.clone()).await;
    // The access log, at debug so that busy gateways log only what needs attention.
    tracing::debug!(
        parent: &span,
        status = response.status().as_u16(),
        elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request served"
    );
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-service-request-id", value);
    }
    response
}
