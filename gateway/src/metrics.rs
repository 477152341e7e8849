//! The gateway's HTTP series: request counts and latency histograms by route, method and
//! status. Kept per gateway (not process-wide) so gateways sharing a process count apart.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use latchkey_shared::metrics::{labels, Requests};

use crate::state::AppState;

pub struct Metrics {
    http: Requests,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            http: Requests::new(
                "latchkey_http_requests_total",
                "latchkey_http_request_duration_seconds",
                "HTTP requests",
            ),
        }
    }
}

impl Metrics {
    /// This gateway's series, then the process-wide ones (in the embedded system those include
    /// the services').
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.http.render(&mut out);
        latchkey_shared::metrics::render(&mut out);
        out
    }
}

/// Middleware recording every request; unknown paths share one label so scans cannot blow up
/// the series count.
pub async fn record(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = request.method().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    app.metrics.http.observe(
        labels(&[("route", &route), ("method", &method), ("status", &status)]),
        started.elapsed().as_secs_f64(),
    );
    response
}
