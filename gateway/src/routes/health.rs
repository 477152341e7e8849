//! `/health/live`, `/health/ready` (every service answers gRPC health SERVING) and `/metrics`.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use crate::state::AppState;

pub async fn live() -> Json<Value> {
    Json(json!({ "status": "live" }))
}

pub async fn ready(State(app): State<AppState>) -> (StatusCode, Json<Value>) {
    if app.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "draining" })),
        );
    }
    let checks = app.health.iter().map(|(name, channel)| {
        let mut client = HealthClient::new(channel.clone());
        async move {
            let mut request = tonic::Request::new(HealthCheckRequest {
                service: String::new(),
            });
            request.set_timeout(Duration::from_secs(1));
            let serving = tokio::time::timeout(Duration::from_secs(2), client.check(request))
                .await
                .ok()
                .and_then(Result::ok)
                .is_some_and(|r| r.into_inner().status() == ServingStatus::Serving);
            (*name, serving)
        }
    });
    let results = futures::future::join_all(checks).await;
    let all = results.iter().all(|(_, ok)| *ok);
    let services: serde_json::Map<String, Value> = results
        .into_iter()
        .map(|(n, ok)| {
            (
                n.to_owned(),
                json!(if ok { "serving" } else { "not_serving" }),
            )
        })
        .collect();
    let status = if all {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({ "status": if all { "ready" } else { "not_ready" }, "services": services })),
    )
}

pub async fn metrics(
    State(app): State<AppState>,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        app.metrics.render() + &app.limits.render(),
    )
}
