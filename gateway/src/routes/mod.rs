//! The REST routes under `/api/v1`, one module per spec area, plus the operational routes.

pub mod health;
pub mod internal;
pub mod projects;
pub mod root;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, patch};
use axum::Router;

use crate::access;
use crate::state::AppState;

/// Everything under `/api/v1`. Access headers are validated for matched routes only, so an
/// unknown path is 404 whatever the headers (80 §11.10).
pub fn api(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/api/v1", get(root::root))
        .route("/api/v1/", get(root::root))
        .route("/api/v1/openapi.json", get(crate::openapi::document))
        .route("/api/v1/projects/current", get(projects::current))
        .route(
            "/api/v1/projects/{project_id}/.well-known/jwks.json",
            get(projects::jwks),
        )
        .route(
            "/api/v1/internal/project",
            get(internal::get_project).patch(internal::update_project),
        )
        .route(
            "/api/v1/internal/api-keys",
            get(internal::list_api_keys).post(internal::create_api_key),
        )
        .route(
            "/api/v1/internal/api-keys/{api_key_id}",
            patch(internal::update_api_key),
        )
        .route_layer(from_fn_with_state(state, access::validate))
}

/// Health and metrics, outside `/api/v1` and without headers (80 §11.6).
pub fn operations() -> Router<AppState> {
    Router::new()
        .route("/health/live", get(health::live))
        .route("/health/ready", get(health::ready))
        .route("/metrics", get(health::metrics))
}
