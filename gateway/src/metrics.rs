//! Prometheus text metrics: request counts and latency histograms by route and status.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::state::AppState;

const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

#[derive(Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

#[derive(Default)]
pub struct Metrics {
    series: Mutex<BTreeMap<(String, String, u16), Series>>,
}

impl Metrics {
    fn observe(&self, route: String, method: String, status: u16, seconds: f64) {
        if let Ok(mut series) = self.series.lock() {
            let s = series.entry((route, method, status)).or_default();
            s.count += 1;
            s.sum += seconds;
            for (i, bound) in BUCKETS.iter().enumerate() {
                if seconds <= *bound {
                    s.buckets[i] += 1;
                }
            }
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP latchkey_http_requests_total HTTP requests by route, method and status."
        );
        let _ = writeln!(out, "# TYPE latchkey_http_requests_total counter");
        let _ = writeln!(
            out,
            "# HELP latchkey_http_request_duration_seconds HTTP request latency."
        );
        let _ = writeln!(
            out,
            "# TYPE latchkey_http_request_duration_seconds histogram"
        );
        let Ok(series) = self.series.lock() else {
            return out;
        };
        for ((route, method, status), s) in series.iter() {
            let labels = format!("route=\"{route}\",method=\"{method}\",status=\"{status}\"");
            let _ = writeln!(out, "latchkey_http_requests_total{{{labels}}} {}", s.count);
            for (i, bound) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "latchkey_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {}",
                    s.buckets[i]
                );
            }
            let _ = writeln!(
                out,
                "latchkey_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "latchkey_http_request_duration_seconds_sum{{{labels}}} {}",
                s.sum
            );
            let _ = writeln!(
                out,
                "latchkey_http_request_duration_seconds_count{{{labels}}} {}",
                s.count
            );
        }
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
    app.metrics.observe(
        route,
        method,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}
